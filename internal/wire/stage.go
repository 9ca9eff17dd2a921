// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import "io"

// ReadBufSize is the staging buffer of each leg's reader: the size of the
// bufio.Reader gorilla (and spdystream) would use, so an idle session costs
// what it did. Reads larger than it go straight into the caller's buffer.
const ReadBufSize = 4096

// Stage is the read side the hand-written readers share (the client's
// WebSocket frames in read.go; every SPDY frame reader's source,
// StagedReader):
// frame headers and small payloads are read through it; a large payload is
// read straight into the caller's buffer and the read runs on into the room
// behind it, the overflow (the next frame's header, most often) staged, so
// that header costs no read syscall of its own. Only the owning reader
// goroutine touches it.
type Stage struct {
	buf      [ReadBufSize]byte
	pos, end int
}

// Fill stages at least n (≤ ReadBufSize) bytes from r.
func (s *Stage) Fill(r io.Reader, n int) error {
	if s.end-s.pos >= n {
		return nil
	}
	if s.pos > 0 {
		s.end = copy(s.buf[:], s.buf[s.pos:s.end])
		s.pos = 0
	}
	for s.end < n {
		m, err := r.Read(s.buf[s.end:])
		s.end += m
		if err != nil {
			if s.end >= n {
				return nil
			}
			return EOFErr(s.end, err)
		}
	}
	return nil
}

// Take returns the next n staged bytes (n ≤ what Fill made sure of) and
// consumes them.
func (s *Stage) Take(n int) []byte {
	b := s.buf[s.pos : s.pos+n]
	s.pos += n
	return b
}

// Staged is what is staged and not yet taken (read-only, valid until the
// next call on s).
func (s *Stage) Staged() []byte { return s.buf[s.pos:s.end] }

// Read reads at most want (≤ len(p)) bytes into p: staged bytes first;
// with none staged, a read of ReadBufSize or more goes straight into p and
// may run on into p[want:] (up to ReadBufSize further), what ran on being
// staged for the next call; a smaller one is read through the Stage.
func (s *Stage) Read(r io.Reader, p []byte, want int) (int, error) {
	if want == 0 {
		return 0, nil
	}
	if s.end > s.pos {
		n := copy(p[:want], s.buf[s.pos:s.end])
		s.pos += n
		return n, nil
	}
	if want >= ReadBufSize {
		n, err := r.Read(p[:min(len(p), want+ReadBufSize)])
		s.pos, s.end = 0, 0
		if n > want {
			s.end = copy(s.buf[:], p[want:n])
			n = want
		}
		return n, err
	}
	m, err := r.Read(s.buf[:])
	s.end = m
	s.pos = copy(p[:want], s.buf[:m])
	return s.pos, err
}

// Skip consumes n bytes of r, returning how many it consumed: n, or fewer
// with the error that stopped it (the stream's position stays known, so a
// read that timed out can be retried).
func (s *Stage) Skip(r io.Reader, n int) (int, error) {
	skipped := 0
	for {
		k := min(n-skipped, s.end-s.pos)
		s.pos += k
		skipped += k
		if skipped == n {
			return n, nil
		}
		m, err := r.Read(s.buf[:])
		s.pos, s.end = 0, m
		if err != nil && m == 0 {
			return skipped, err
		}
	}
}

// EOFErr is io.ReadFull's rule: io.EOF when nothing was read,
// io.ErrUnexpectedEOF when the stream ended part-way.
func EOFErr(read int, err error) error {
	if err == io.EOF && read > 0 {
		return io.ErrUnexpectedEOF
	}
	return err
}

// StagedReader is R read through a Stage, as internal/spdy's Reader reads
// its source: headers and small payloads come through the stage, and a
// large payload read runs on into the room behind p, up to cap(p), the
// overflow (the next frame's header, most often) staged, so that header
// costs no read of its own. Its reader's alone.
type StagedReader struct {
	R  io.Reader
	st Stage
}

func (s *StagedReader) Read(p []byte) (int, error) {
	return s.st.Read(s.R, p[:cap(p)], len(p))
}

// Peek stages n bytes (at most ReadBufSize).
func (s *StagedReader) Peek(n int) ([]byte, error) {
	if err := s.st.Fill(s.R, n); err != nil {
		return nil, err
	}
	return s.st.Staged()[:n], nil
}

func (s *StagedReader) Discard(n int) (int, error) { return s.st.Skip(s.R, n) }

func (s *StagedReader) Buffered() int { return len(s.st.Staged()) }
