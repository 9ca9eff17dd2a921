// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package recording

import (
	"errors"
	"os"
)

// The file's portable half: every write goes through the page cache.

func (w *file) setDirect(bool) error { return errors.ErrUnsupported }

// write writes bufs at off, in order, and moves off past them.
func (w *file) write(bufs [][]byte) error {
	for _, b := range bufs {
		n, err := w.f.WriteAt(b, w.off)
		w.off += int64(n)
		if err != nil {
			return &os.PathError{Op: "write", Path: w.f.Name(), Err: err}
		}
	}
	return nil
}
