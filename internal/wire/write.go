// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"math/bits"
	"net"
	"time"
)

// WriteFrame sends one binary message. buf must hold the channel byte at
// index 0; it is sent as is, so callers reuse one buffer and nothing is
// copied or allocated here.
func (c *Conn) WriteFrame(buf []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.beginWrite(); err != nil {
		return err
	}
	return c.writeMessage(OpBinary, nil, buf)
}

// Headroom is the room WriteInPlace needs in front of a message's payload:
// the longest header of a server's frame (no mask).
const Headroom = 10

// WriteInPlace sends b[Headroom:] as one binary message, writing the frame
// header into the room in front of it: header and payload leave in one
// write (one TLS record on a TLS connection) with no copy, on the hottest
// path a node has (output on its way to the apiserver). b[:Headroom] is
// overwritten.
func (c *Conn) WriteInPlace(b []byte) error {
	n := len(b) - Headroom
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.beginWrite(); err != nil {
		return err
	}
	c.hdr = appendHeader(c.hdr[:0], OpBinary, n)
	start := Headroom - len(c.hdr)
	copy(b[start:], c.hdr)
	_, err := c.nc.Write(b[start:])
	return err
}

// beginWrite (mu held) refuses data after the close frame, moves the write
// deadline at most once per Slack, and counts the write as activity.
func (c *Conn) beginWrite() error {
	if c.closed.Load() {
		return ErrSessionClosed
	}
	if want := time.Now().Add(c.cfg.WriteTimeout); want.Sub(c.writeDeadline) > Slack(c.cfg.WriteTimeout) {
		c.writeDeadline = want
		if err := c.nc.SetWriteDeadline(want); err != nil {
			return err
		}
	}
	c.activity.Add(1)
	return nil
}

// writeControl sends a control frame (a pong, a close reply) under mu,
// with its own deadline.
func (c *Conn) writeControl(op int, payload []byte, deadline time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeDeadline = deadline
	if err := c.nc.SetWriteDeadline(deadline); err != nil {
		return err
	}
	return c.writeMessage(op, nil, payload)
}

// writeMessage (mu held) writes one final frame of op whose payload is
// prefix then p: on plain TCP the header and prefix from one small buffer
// and p after them in one writev, p not copied; on other connections (TLS,
// where two writes would be two records) through one pooled buffer. It is
// every write of a whole message but WriteInPlace's.
func (c *Conn) writeMessage(op int, prefix, p []byte) error {
	if !c.plain {
		c.hdr = appendHeader(c.hdr[:0], op, len(prefix)+len(p))
		n := len(c.hdr) + len(prefix) + len(p)
		// Power-of-two sizes, so the pools stay few whatever sizes the
		// runtime writes (GetBuf keeps one pool per size).
		bp := GetBuf(max(4096, 1<<bits.Len(uint(n-1))))
		defer PutBuf(bp)
		buf := append(append(append((*bp)[:0], c.hdr...), prefix...), p...)
		_, err := c.nc.Write(buf)
		return err
	}
	c.hdr = appendHeader(c.hdr[:0], op, len(prefix)+len(p))
	c.hdr = append(c.hdr, prefix...)
	c.iov[0], c.iov[1] = c.hdr, p
	bufs := net.Buffers(c.iov[:])
	_, err := bufs.WriteTo(c.nc)
	c.iov[1] = nil // p is the caller's
	return err
}

// WriteChannel sends one binary message of ch followed by p (WritePrefixed).
func (c *Conn) WriteChannel(ch byte, p []byte) error {
	b := [1]byte{ch}
	return c.WritePrefixed(b[:], p)
}

// WritePrefixed sends one binary message of prefix (a few bytes: a channel
// byte, a SPDY frame header) followed by p, without copying p where the
// connection is plain TCP (writeMessage). Stdout and forwarded bytes are
// the runtime side's hottest paths.
func (c *Conn) WritePrefixed(prefix, p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.beginWrite(); err != nil {
		return err
	}
	return c.writeMessage(OpBinary, prefix, p)
}
