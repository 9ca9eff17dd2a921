// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"errors"
	"fmt"
	"io"

	"github.com/gorilla/websocket"
)

// The client side's reads are hand-written (RFC 6455 §5) rather than
// gorilla's NextReader: gorilla allocates a reader per message, and the
// tunnel gets three messages per SPDY frame from client-go, so that is an
// allocation per frame on the hottest path. gorilla does the handshake and
// nothing after it: every byte after the handshake is read from the
// upgraded connection (Conn.src: on plain TCP read(2) inside the poller's
// callback, rawread_linux.go) and written by Conn. Hijacker hands gorilla the
// connection with whatever the HTTP server had buffered put back in front
// (upgrade.Unread), so a first frame sent with the handshake is not lost.

const (
	OpContinuation = 0
	OpText         = websocket.TextMessage
	OpBinary       = websocket.BinaryMessage
	OpClose        = websocket.CloseMessage
	OpPing         = websocket.PingMessage
	OpPong         = websocket.PongMessage
)

// ErrProtocol marks a client that broke RFC 6455 framing: close code 1002.
var ErrProtocol = errors.New("websocket protocol error")

// ErrMessageCut is the connection ending inside a message. It is never
// io.EOF or io.ErrUnexpectedEOF itself, which io.ReadFull and the sessions
// take for the message's own end: a cut message is not a short one, and
// what it held must not be acted on.
var ErrMessageCut = errors.New("connection ended inside a websocket message")

// cutShort turns the end of the connection inside a message into
// ErrMessageCut; other errors pass unchanged.
func cutShort(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: %w", ErrMessageCut, err)
	}
	return err
}

func frameErrf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, a...)...)
}

// msgReader is the reader of the current message; it lives in Conn, so a
// message costs no allocation.
type msgReader struct{ c *Conn }

func (m msgReader) Read(p []byte) (int, error) { return m.c.readPayload(p) }

// readState is Conn's read side. Only the session's read loop touches it.
type readState struct {
	Stage

	inMessage bool  // a data message is being read
	final     bool  // its current frame is the last
	left      int64 // payload bytes left in the current frame
	msgLen    int64 // payload bytes of the message so far
	mask      [4]byte
	maskPos   int
	ctl       [MaxControl]byte // control frame payloads
	err       error            // sticky: the read side is done
	hdr       Follower         // parses each frame's header
}

// NextReader returns the next data message's type and a reader of its
// payload, answering pings and closes on the way, as gorilla's NextReader
// does. What is left unread of the previous message is discarded.
func (c *Conn) NextReader() (int, io.Reader, error) {
	r := &c.rd
	if r.err != nil {
		return 0, nil, r.err
	}
	for r.inMessage {
		if _, err := c.readPayload(r.ctl[:]); err != nil && err != io.EOF {
			return 0, nil, c.fail(err)
		} else if err == io.EOF {
			break
		}
	}
	for {
		op, err := c.nextFrame()
		if err != nil {
			return 0, nil, c.fail(err)
		}
		switch op {
		case OpContinuation:
			return 0, nil, c.fail(frameErrf("continuation frame without a message"))
		case OpText, OpBinary:
			r.inMessage = true
			// A data message proves the peer alive: the session's read
			// deadline moves on (control frames move it in control).
			c.extendReadDeadline()
			return op, msgReader{c}, nil
		}
	}
}

// fail ends the read side. A client that broke the framing or the size
// limit gets the close code RFC 6455 gives it (1002, 1009) at once, as
// gorilla's reader did; the session's status is moot after that.
func (c *Conn) fail(err error) error {
	c.rd.err = err
	c.rd.inMessage = false
	switch {
	case errors.Is(err, websocket.ErrReadLimit):
		c.CloseWith(nil, websocket.CloseMessageTooBig, "")
	case errors.Is(err, ErrProtocol):
		c.CloseWith(nil, websocket.CloseProtocolError, err.Error())
	}
	return err
}

// nextFrame reads frame headers until a data frame, handling control
// frames in between; it returns the data frame's opcode with its payload
// ready to read.
func (c *Conn) nextFrame() (int, error) {
	r := &c.rd
	for {
		h, err := c.nextHeader()
		if err != nil {
			return 0, err
		}
		if !h.Masked {
			return 0, frameErrf("client frame not masked")
		}
		b0 := r.hdr.RawHeader()[0]
		if h.Len > 1<<62 {
			return 0, frameErrf("frame length %d", h.Len)
		}
		n := int64(h.Len)
		r.mask, r.maskPos, r.left = h.Key, 0, n
		fin, op := h.Fin, h.Op
		if b0&RSV != 0 {
			return 0, frameErrf("reserved bits set without an extension")
		}
		switch op {
		case OpPing, OpPong, OpClose:
			if !fin || n > MaxControl {
				return 0, frameErrf("control frame fragmented or longer than 125 bytes")
			}
			if err := c.control(op, int(n)); err != nil {
				return 0, err
			}
			continue
		case OpContinuation:
			if !r.inMessage {
				return OpContinuation, nil
			}
		case OpText, OpBinary:
			if r.inMessage {
				return 0, frameErrf("new message inside a fragmented one")
			}
			r.msgLen = 0
		default:
			return 0, frameErrf("unknown opcode %d", op)
		}
		r.final = fin
		r.msgLen += n
		if r.msgLen > int64(c.cfg.MaxMessageSize) {
			return 0, websocket.ErrReadLimit
		}
		return op, nil
	}
}

// nextHeader reads the next frame header through the stream's one
// frame follower (Follower), which parses it; the payload is the caller's
// to read.
func (c *Conn) nextHeader() (Header, error) {
	r := &c.rd
	for {
		if len(r.Staged()) == 0 {
			if err := r.Fill(c.src, 1); err != nil {
				if err == io.EOF && !r.hdr.AtBoundary() {
					err = io.ErrUnexpectedEOF // cut inside a header, as Fill says of a cut inside its own read
				}
				return Header{}, err
			}
		}
		staged := r.Staged()
		h, header, _, rest := r.hdr.Next(staged)
		r.Take(len(staged) - len(rest))
		if header {
			r.hdr.Skip() // the payload is read here, not followed
			return h, nil
		}
	}
}

// readRaw reads the current frame's payload (at most what is left of it),
// unmasked. Bulk stdin takes one read per message: the Stage's run-on read
// brings the next frame's header along (io.Reader lets a reader use all of
// p).
func (c *Conn) readRaw(p []byte) (int, error) {
	r := &c.rd
	n, err := r.Read(c.src, p, int(min(int64(len(p)), r.left)))
	if n > 0 {
		r.maskPos = Unmask(r.mask, r.maskPos, p[:n])
		r.left -= int64(n)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// readPayload reads the current message across its frames; io.EOF at its
// end.
func (c *Conn) readPayload(p []byte) (int, error) {
	r := &c.rd
	if r.err != nil {
		return 0, r.err
	}
	if !r.inMessage {
		return 0, io.EOF
	}
	for r.left == 0 {
		if r.final {
			r.inMessage = false
			return 0, io.EOF
		}
		op, err := c.nextFrame()
		if err != nil {
			return 0, c.fail(cutShort(err))
		}
		if op != OpContinuation {
			return 0, c.fail(frameErrf("data frame of type %d inside a fragmented message", op))
		}
	}
	n, err := c.readRaw(p)
	if n > 0 {
		c.activity.Add(1) // client data: the session is not idle
	}
	if err != nil {
		return n, c.fail(cutShort(err))
	}
	return n, nil
}
