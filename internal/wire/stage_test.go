// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
)

// timeoutOnce serves its chunks one per read, with a timeout in place of
// the one at index fail.
type timeoutOnce struct {
	chunks [][]byte
	fail   int
	reads  int
}

func (r *timeoutOnce) Read(p []byte) (int, error) {
	i := r.reads
	r.reads++
	switch {
	case i == r.fail:
		return 0, os.ErrDeadlineExceeded
	case len(r.chunks) == 0:
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	if len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

// TestStagedReaderSkipResumes: a skip that a read deadline cuts says how
// far it got, so that once reads go on the rest is skipped and what
// follows is read, not bytes that were to be skipped.
func TestStagedReaderSkipResumes(t *testing.T) {
	skip := bytes.Repeat([]byte{'x'}, 6000)
	src := &timeoutOnce{chunks: [][]byte{skip[:100], skip[100:5000], skip[5000:], []byte("next")}, fail: 2}
	s := &StagedReader{R: src}
	if _, err := s.Peek(8); err != nil { // the first chunk staged, as a frame header's read stages it
		t.Fatal(err)
	}
	n, err := s.Discard(len(skip))
	if !errors.Is(err, os.ErrDeadlineExceeded) || n == 0 || n >= len(skip) {
		t.Fatalf("skip: %d, %v; want part of it and the deadline", n, err)
	}
	if k, err := s.Discard(len(skip) - n); err != nil || k != len(skip)-n {
		t.Fatalf("the rest: %d, %v", k, err)
	}
	if b, err := s.Peek(4); err != nil || string(b) != "next" {
		t.Fatalf("after the skip: %q, %v", b, err)
	}
}
