// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import "io"

// ReadFromChannel sends what src yields, until its EOF, as binary messages
// of channel ch, each at most size bytes, and reports whether the kernel
// carried them. Where src is a pipe or FIFO (a runtime's copy of a
// process's output), the connection plain TCP and the system Linux, the
// bytes go from src to the socket inside the kernel (splice_linux.go); elsewhere through one pooled buffer. Either way every message is
// on the wire when it returns, so a status written after it comes last.
func (c *Conn) ReadFromChannel(ch byte, src io.Reader, size int) (n int64, kernel bool, err error) {
	if n, ok, err := c.spliceFrom(ch, src, size); ok {
		return n, true, err
	}
	bp := GetBuf(size)
	defer PutBuf(bp)
	buf := *bp
	for {
		k, rerr := src.Read(buf)
		if k > 0 {
			if err := c.WriteChannel(ch, buf[:k]); err != nil {
				return n, false, err
			}
			n += int64(k)
		}
		if rerr == io.EOF {
			return n, false, nil
		}
		if rerr != nil {
			return n, false, rerr
		}
	}
}
