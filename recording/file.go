// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package recording

import "os"

// align is what direct I/O asks of a write's memory, length and file
// offset: the logical block size of every disk in use (512 or 4096).
const align = 4096

// file is a recording's file, written by the recording's writer goroutine
// alone, at explicit offsets. Whole aligned blocks go with O_DIRECT where
// the file system allows it (Linux: file_linux.go), past the page cache:
// copying a recording into the page cache (and allocating pages for it)
// cost a bulk session more than encoding it, and pushed out pages the node
// needs. The tail that does not fill a block is written through the page
// cache when the session goes quiet or ends, and again, whole, with the
// block it begins. Elsewhere, or without O_DIRECT, every byte goes
// through the page cache (file_other.go).
type file struct {
	f      *os.File
	fd     int
	direct bool  // O_DIRECT is set
	off    int64 // where the next write goes: every byte before it is written
}

// createFile creates path, which must not exist, with direct I/O if asked
// and the kernel and file system allow it.
func createFile(path string, direct bool) (*file, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	w := &file{f: f, fd: int(f.Fd())}
	// Setting O_DIRECT after the open, not in it: a file system without
	// direct I/O refuses it only once the file exists.
	w.direct = direct && w.setDirect(true) == nil
	return w, nil
}

// writeTail writes tail, the bytes after off that do not fill a block,
// through the page cache, leaving off where it is: the next direct write
// begins there, with these bytes again.
func (w *file) writeTail(tail []byte) error {
	if !w.direct {
		return w.write([][]byte{tail})
	}
	if err := w.setDirect(false); err != nil {
		return err
	}
	w.direct = false
	off := w.off
	err := w.write([][]byte{tail})
	w.off = off
	if err != nil {
		return err
	}
	w.direct = true
	return w.setDirect(true)
}

func (w *file) Close() error { return w.f.Close() }
