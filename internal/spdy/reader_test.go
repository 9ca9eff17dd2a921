// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package spdy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// frames is a data frame, a PING, a RST_STREAM and a FIN data frame.
func frames() []byte {
	data := make([]byte, HeaderLen+5)
	PutDataHeader(data, 3, 5, false)
	copy(data[HeaderLen:], "hello")
	fin := make([]byte, HeaderLen)
	PutDataHeader(fin, 5, 0, true)
	b := append([]byte(nil), data...)
	b = append(AppendControl(b, TypePing, 0, 4), 0, 0, 0, 1)
	b = append(AppendControl(b, TypeRstStream, 0, 8), 0, 0, 0, 7, 0, 0, 0, StatusCancel)
	return append(b, fin...)
}

func newReader(b []byte) *Reader { return NewReader(bufio.NewReaderSize(bytes.NewReader(b), 16)) }

// TestReader: headers read as written, payloads bounded by their frame,
// what a caller leaves skipped, a clean end is io.EOF.
func TestReader(t *testing.T) {
	r := NewReader(bufio.NewReader(bytes.NewReader(frames())))
	h, err := r.Next()
	if err != nil || h.Control() || h.StreamID() != 3 || h.Length() != 5 || h.Fin() || r.Stream() != 3 {
		t.Fatalf("data frame %x (%v)", h, err)
	}
	if p, err := r.Peek(5); err != nil || string(p) != "hello" {
		t.Fatalf("peek %q (%v)", p, err)
	}
	if _, err := r.Peek(6); !errors.Is(err, ErrPastFrame) {
		t.Fatalf("peek past the frame: %v", err)
	}
	if err := r.ReadFull(make([]byte, 6)); !errors.Is(err, ErrPastFrame) {
		t.Fatalf("read past the frame: %v", err)
	}
	p := make([]byte, 100)
	if n, err := r.Read(p[:2]); n != 2 || err != nil || r.Remaining() != 3 {
		t.Fatalf("read %d (%v), %d left", n, err, r.Remaining())
	}
	if n, err := r.Read(p); n != 3 || err != nil || string(p[:3]) != "llo" {
		t.Fatalf("read %q (%v)", p[:n], err)
	}
	if n, err := r.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("read at the frame's end: %d, %v", n, err)
	}
	if h, err = r.Next(); err != nil || !h.Control() || h.Type() != TypePing || r.Stream() != 0 {
		t.Fatalf("ping %x (%v)", h, err)
	}
	// the ping's payload left unread
	if h, err = r.Next(); err != nil || h.Type() != TypeRstStream || r.Stream() != 7 {
		t.Fatalf("reset %x, stream %d (%v)", h, r.Stream(), err)
	}
	if b, ok := r.Buffered(); ok {
		t.Fatalf("buffered %x inside a frame", b)
	}
	if err := r.Skip(); err != nil {
		t.Fatal(err)
	}
	if b, ok := r.Buffered(); !ok || b.StreamID() != 5 {
		t.Fatalf("buffered %x, %v", b, ok)
	}
	if h, err = r.Next(); err != nil || !h.Fin() || h.Length() != 0 || h.Flags() != FlagFin {
		t.Fatalf("fin %x (%v)", h, err)
	}
	if _, err = r.Next(); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
}

// TestReaderCut: a stream cut inside a header or a payload is
// io.ErrUnexpectedEOF, never a clean io.EOF; cut between frames it is.
func TestReaderCut(t *testing.T) {
	all := frames()
	ends := map[int]bool{0: true, HeaderLen + 5: true, 2*HeaderLen + 9: true, 3*HeaderLen + 17: true, len(all): true}
	for cut := 0; cut <= len(all); cut++ {
		r := newReader(all[:cut])
		var err error
		for err == nil {
			_, err = r.Next()
		}
		if want := map[bool]error{true: io.EOF, false: io.ErrUnexpectedEOF}[ends[cut]]; err != want {
			t.Errorf("cut at %d: %v, want %v", cut, err, want)
		}
	}
	r := newReader(all[:HeaderLen+2])
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadFull(make([]byte, 5)); err != io.ErrUnexpectedEOF {
		t.Fatalf("payload cut: %v", err)
	}
	r = newReader(all[:HeaderLen+2])
	_, _ = r.Next()
	if _, err := r.Peek(4); err != io.ErrUnexpectedEOF {
		t.Fatalf("peek of a cut payload: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestReaderMaxLength: the largest frame a 24-bit length allows is read
// and skipped whole, to the byte.
func TestReaderMaxLength(t *testing.T) {
	h := AppendControl(nil, TypeSettings, 0, MaxData)
	src := io.MultiReader(bytes.NewReader(h), io.LimitReader(zeros{}, MaxData), bytes.NewReader(frames()[:HeaderLen]))
	r := NewReader(bufio.NewReader(src))
	got, err := r.Next()
	if err != nil || got.Length() != MaxData || r.Remaining() != MaxData || got.Type() != TypeSettings {
		t.Fatalf("header %x, length %d (%v)", got, got.Length(), err)
	}
	if err := r.ReadFull(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if got, err = r.Next(); err != nil || got.StreamID() != 3 {
		t.Fatalf("after the largest frame: %x (%v)", got, err)
	}
}

// FuzzReader: arbitrary bytes, read with an arbitrary mix of reads, peeks
// and skips, never panic nor read past a frame; read whole, the frames
// give back the stream byte for byte, and its end is io.EOF exactly when it
// falls between frames.
func FuzzReader(f *testing.F) {
	f.Add(frames(), []byte{0, 1, 2, 3})
	f.Add(frames()[:11], []byte{1})
	f.Add(AppendControl(nil, TypeRstStream, 0, 2), []byte{3})
	f.Fuzz(func(t *testing.T, data, ops []byte) {
		r := NewReader(bufio.NewReaderSize(bytes.NewReader(data), 16))
		var out []byte
		whole := true // every payload read to its end, so out is the stream
		cut := false  // a payload read ended early
		for i := 0; ; i++ {
			h, err := r.Next()
			if err != nil {
				switch {
				case err != io.EOF && err != io.ErrUnexpectedEOF:
					t.Fatalf("error %v", err)
				case whole && !bytes.Equal(out, data[:len(out)]):
					t.Fatalf("frames read back as %x", out)
				case whole && (err == io.EOF) != (!cut && len(out) == len(data)):
					t.Fatalf("%v after %d of %d bytes", err, len(out), len(data))
				}
				return
			}
			if h.Length() > MaxData || r.Remaining() != h.Length() {
				t.Fatalf("header %x: %d remaining", h, r.Remaining())
			}
			out = append(out, h[:]...)
			op := byte(1)
			if len(ops) > 0 {
				op = ops[i%len(ops)]
			}
			if p, err := r.Peek(min(4, h.Length())); err == nil && len(p) != min(4, h.Length()) {
				t.Fatalf("peeked %d bytes", len(p))
			}
			_ = r.Stream()
			switch op % 3 {
			case 0:
				whole = whole && h.Length() == 0
			case 1:
				p, err := io.ReadAll(r)
				out = append(out, p...)
				cut = cut || err != nil
			case 2:
				p := make([]byte, min(h.Length(), 64))
				if err := r.ReadFull(p); err != nil {
					whole = false
				}
				whole = whole && len(p) == h.Length()
				out = append(out, p...)
			}
			if whole && !cut && r.Remaining() != 0 {
				t.Fatalf("%d bytes left of a frame read whole", r.Remaining())
			}
		}
	})
}
