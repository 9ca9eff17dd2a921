// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"net"

	"golang.org/x/sys/unix"
)

// unacked is how many bytes written to c the peer has not acknowledged
// (sent or not), or -1 when it cannot be told.
func unacked(c *net.TCPConn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	_ = rc.Control(func(fd uintptr) { // a closed socket: n stays -1
		if v, err := unix.IoctlGetInt(int(fd), unix.TIOCOUTQ); err == nil {
			n = v
		}
	})
	return n
}
