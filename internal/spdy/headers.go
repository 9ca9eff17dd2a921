// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package spdy

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Limits on a decoded header block. The block is compressed, so its length
// on the wire says nothing about what it expands to: every count and length
// is checked before anything is allocated.
const (
	MaxHeaderFields = 64
	MaxHeaderField  = 4096  // bytes of one name or value
	MaxHeaderBlock  = 16384 // decoded bytes of one block
)

// ErrHeaders marks a header block that cannot be decoded; the connection's
// header stream is then broken and the connection must end.
var ErrHeaders = errors.New("SPDY header block")

// HeaderDecoder decodes the header blocks of one direction of one
// connection: they form a single zlib stream, so blocks must be decoded in
// the order they came. Not safe for concurrent use.
type HeaderDecoder struct {
	in queue
	z  io.ReadCloser
}

// queue is what the inflater reads: the blocks given so far, less what it
// consumed. A block's last bytes (the sync flush's empty stored block) are
// consumed only when the next block is read, so they are kept, not dropped.
// It is an io.ByteReader, so the inflater reads from it exactly what it
// needs and keeps no buffer of its own.
type queue struct {
	b   []byte
	off int
}

func (q *queue) push(p []byte) {
	if q.off > 0 {
		q.b = append(q.b[:0], q.b[q.off:]...)
		q.off = 0
	}
	q.b = append(q.b, p...)
}

func (q *queue) Read(p []byte) (int, error) {
	if q.off == len(q.b) {
		return 0, io.ErrUnexpectedEOF // a block shorter than its contents
	}
	n := copy(p, q.b[q.off:])
	q.off += n
	return n, nil
}

func (q *queue) ReadByte() (byte, error) {
	if q.off == len(q.b) {
		return 0, io.ErrUnexpectedEOF
	}
	q.off++
	return q.b[q.off-1], nil
}

// Decode decodes one header block. Names are canonicalised as net/http
// does; a value holding NULs is several values, as SPDY/3 encodes them.
func (d *HeaderDecoder) Decode(block []byte) (http.Header, error) {
	if len(d.in.b)-d.in.off+len(block) > MaxHeaderBlock {
		return nil, fmt.Errorf("%w: %d bytes compressed", ErrHeaders, len(block))
	}
	d.in.push(block)
	if d.z == nil {
		z, err := zlib.NewReaderDict(&d.in, []byte(dictionary))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrHeaders, err)
		}
		d.z = z
	}
	h, err := d.decode()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHeaders, err)
	}
	return h, nil
}

func (d *HeaderDecoder) decode() (http.Header, error) {
	var b4 [4]byte
	u32 := func() (int, error) {
		if _, err := io.ReadFull(d.z, b4[:]); err != nil {
			return 0, err
		}
		return int(binary.BigEndian.Uint32(b4[:])), nil
	}
	count, err := u32()
	if err != nil {
		return nil, err
	}
	if count > MaxHeaderFields {
		return nil, fmt.Errorf("%d fields", count)
	}
	h := make(http.Header, count)
	total := 0
	var field [2]string
	for range count {
		for i := range field {
			n, err := u32()
			if err != nil {
				return nil, err
			}
			if total += n; n > MaxHeaderField || total > MaxHeaderBlock {
				return nil, fmt.Errorf("a field of %d bytes", n)
			}
			b := make([]byte, n)
			if _, err := io.ReadFull(d.z, b); err != nil {
				return nil, err
			}
			field[i] = string(b)
		}
		name := field[0]
		if name == "" || strings.ToLower(name) != name {
			return nil, fmt.Errorf("header name %q", name)
		}
		for v := range bytes.SplitSeq([]byte(field[1]), []byte{0}) {
			h.Add(name, string(v))
		}
	}
	return h, nil
}
