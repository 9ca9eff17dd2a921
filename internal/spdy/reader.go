// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package spdy

import (
	"encoding/binary"
	"errors"
	"io"
)

// Header is a frame's 8-byte header as the wire has it, so a relay can
// pass it on unchanged; its methods read the fields.
type Header [HeaderLen]byte

// Control reports whether h is a control frame's header.
func (h Header) Control() bool { return Control(h[:]) }

// Type is a control frame's type.
func (h Header) Type() uint16 { return ControlType(h[:]) }

// Version is a control frame's SPDY version (3 for SPDY/3.1).
func (h Header) Version() uint16 { return binary.BigEndian.Uint16(h[:2]) & 0x7fff }

// Flags is the frame's flags byte.
func (h Header) Flags() byte { return h[4] }

// Fin reports whether the frame carries FLAG_FIN.
func (h Header) Fin() bool { return h[4]&FlagFin != 0 }

// Length is the payload length, at most MaxData.
func (h Header) Length() int { return Length(h[:]) }

// StreamID is a data frame's stream (control frames carry theirs in the
// payload: Reader.Stream).
func (h Header) StreamID() uint32 { return StreamID(h[:]) }

// Source is what a Reader reads: a *bufio.Reader, or any buffered reader
// that can show what it already holds without reading more.
type Source interface {
	io.Reader
	// Peek returns the next n bytes without consuming them.
	Peek(n int) ([]byte, error)
	// Discard skips n bytes, returning how many it skipped.
	Discard(n int) (int, error)
	// Buffered is how many bytes can be had without a read.
	Buffered() int
}

// ErrPastFrame is a read or peek of more payload than the frame has left.
var ErrPastFrame = errors.New("spdy: read past the end of the frame")

// Reader reads a stream of SPDY frames: Next reads a frame's header, and
// the payload is then the caller's to Read, Peek or Skip, never past the
// frame's end: the frame's length bounds every payload read here, once,
// rather than in each caller. What a caller leaves of a payload the next
// Next skips. A stream that ends between frames is io.EOF; one that ends
// inside a header or a payload is io.ErrUnexpectedEOF.
type Reader struct {
	src Source
	hdr Header // a field, so that reading it allocates nothing
	rem int    // payload bytes of the current frame not yet consumed
}

// NewReader returns a Reader of src's frames.
func NewReader(src Source) *Reader { return &Reader{src: src} }

// Next skips what is left of the current frame and reads the next one's
// header.
func (r *Reader) Next() (Header, error) {
	if err := r.Skip(); err != nil {
		return Header{}, err
	}
	if _, err := io.ReadFull(r.src, r.hdr[:]); err != nil {
		return Header{}, err
	}
	r.rem = r.hdr.Length()
	return r.hdr, nil
}

// Buffered returns the next frame's header without consuming it when the
// current frame's payload is all read and src already holds the next
// header, so looking costs no read; ok is false otherwise. Next then takes
// it.
func (r *Reader) Buffered() (h Header, ok bool) {
	if r.rem > 0 || r.src.Buffered() < HeaderLen {
		return h, false
	}
	b, err := r.src.Peek(HeaderLen)
	if err != nil {
		return h, false
	}
	return Header(b), true
}

// Remaining is how much of the current frame's payload is not yet
// consumed.
func (r *Reader) Remaining() int { return r.rem }

// Read reads the current frame's payload, io.EOF at its end. It passes p
// to the source cut to what the frame has left, its capacity unchanged (a
// source may read on into the room behind it).
func (r *Reader) Read(p []byte) (int, error) {
	if r.rem == 0 {
		return 0, io.EOF
	}
	n, err := r.src.Read(p[:min(len(p), r.rem)])
	r.rem -= n
	if err == io.EOF && r.rem > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// ReadFull fills p from the payload; a p longer than what the frame has
// left is ErrPastFrame, before anything is read.
func (r *Reader) ReadFull(p []byte) error {
	if len(p) > r.rem {
		return ErrPastFrame
	}
	for got := 0; got < len(p); {
		n, err := r.Read(p[got:])
		got += n
		if err != nil && got < len(p) {
			return err
		}
	}
	return nil
}

// Peek returns the payload's next n bytes without consuming them, valid
// until the next call on r; n past the frame's end is ErrPastFrame.
func (r *Reader) Peek(n int) ([]byte, error) {
	if n > r.rem {
		return nil, ErrPastFrame
	}
	b, err := r.src.Peek(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return b, err
}

// Stream is the stream the current frame belongs to, when none of its
// payload is consumed yet: a data frame's from its header; a SYN_STREAM's,
// SYN_REPLY's, RST_STREAM's, HEADERS' or WINDOW_UPDATE's from its payload's
// first word, peeked. It is 0 for other frames, and when the payload is
// too short to hold one or cannot be read (the next read says why).
func (r *Reader) Stream() uint32 {
	if !r.hdr.Control() {
		return r.hdr.StreamID()
	}
	switch r.hdr.Type() {
	case TypeSynStream, TypeSynReply, TypeRstStream, TypeHeaders, TypeWindowUpd:
	default:
		return 0
	}
	if r.rem != r.hdr.Length() {
		return 0
	}
	b, err := r.Peek(4)
	if err != nil {
		return 0
	}
	return StreamID(b)
}

// Skip consumes what is left of the current frame's payload.
func (r *Reader) Skip() error {
	if r.rem == 0 {
		return nil
	}
	n, err := r.src.Discard(r.rem)
	r.rem -= n
	if err == io.EOF && r.rem > 0 {
		err = io.ErrUnexpectedEOF
	}
	return err
}
