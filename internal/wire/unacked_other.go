//go:build !linux

package wire

import "net"

// unacked cannot be told here: a close waits CloseGrace alone
// (Conn.graceDeadline).
func unacked(*net.TCPConn) int { return -1 }
