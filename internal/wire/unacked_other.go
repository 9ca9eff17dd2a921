// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package wire

import "net"

// unacked cannot be told here: a close waits CloseGrace alone
// (Conn.graceDeadline).
func unacked(*net.TCPConn) int { return -1 }
