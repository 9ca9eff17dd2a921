// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// TerminalSize is the v5 resize message (capitalised field names, as
// client-go marshals them).
type TerminalSize struct {
	Width  uint16
	Height uint16
}

// maxResizePending bounds what an unfinished resize object may hold across
// messages; a real one is ~30 bytes.
const maxResizePending = 4096

// ResizeStream reads channel 4 as upstream does: one continuous stream of
// JSON objects, so an object may be split across messages. Only the read
// loop touches it.
type ResizeStream struct {
	pending []byte // the start of an object whose end has not come yet
}

// Feed takes one channel-4 message and returns the sizes it completed.
// Everything in the message is decoded before anything is returned, so a
// bad message applies nothing.
func (r *ResizeStream) Feed(msg []byte) ([]TerminalSize, error) {
	in := msg
	if len(r.pending) > 0 {
		in = append(r.pending, msg...)
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	var sizes []TerminalSize
	var done int64
	for {
		var size TerminalSize
		err := dec.Decode(&size)
		if err == nil {
			sizes = append(sizes, size)
			done = dec.InputOffset()
			continue
		}
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			break // the rest, if any, is an object still arriving
		}
		return nil, ProtocolErrorf("invalid resize message %q: %v", Truncate(msg, 64), err)
	}
	rest := bytes.TrimLeft(in[done:], " \t\r\n")
	if len(rest) > maxResizePending {
		return nil, ProtocolErrorf("unfinished resize object longer than %d bytes", maxResizePending)
	}
	r.pending = append(r.pending[:0], rest...)
	return sizes, nil
}

func (s TerminalSize) String() string { return fmt.Sprintf("%dx%d", s.Width, s.Height) }

// ProtocolError is a client's breach of the v5 protocol (above the
// framing): the session ends with a status saying what it was.
type ProtocolError struct{ msg string }

func (e *ProtocolError) Error() string { return "v5 protocol error: " + e.msg }

// ProtocolErrorf makes a ProtocolError.
func ProtocolErrorf(format string, a ...any) error {
	return &ProtocolError{msg: fmt.Sprintf(format, a...)}
}

// Truncate cuts b to n bytes for an error message.
func Truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
