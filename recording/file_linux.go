// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package recording

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The file's Linux half: direct I/O (O_DIRECT) and vectored writes at an
// offset.

func (w *file) setDirect(on bool) error {
	flags, err := unix.FcntlInt(uintptr(w.fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if on {
		flags |= unix.O_DIRECT
	} else {
		flags &^= unix.O_DIRECT
	}
	_, err = unix.FcntlInt(uintptr(w.fd), unix.F_SETFL, flags)
	return err
}

// write writes bufs at off, in order, and moves off past them. With
// O_DIRECT each must be aligned; a refusal (a disk with larger blocks)
// turns direct I/O off for good and the write is made again through the
// page cache.
func (w *file) write(bufs [][]byte) error {
	for len(bufs) > 0 {
		if len(bufs[0]) == 0 {
			bufs = bufs[1:]
			continue
		}
		n, err := unix.Pwritev(w.fd, bufs, w.off)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EINVAL) && w.direct:
			w.direct = false
			if err := w.setDirect(false); err != nil {
				return fmt.Errorf("turning direct I/O off: %w", err)
			}
			continue
		case err != nil:
			return &os.PathError{Op: "write", Path: w.f.Name(), Err: err}
		case n == 0:
			return &os.PathError{Op: "write", Path: w.f.Name(), Err: unix.EIO}
		}
		w.off += int64(n)
		for n > 0 {
			if n < len(bufs[0]) {
				bufs[0] = bufs[0][n:]
				break
			}
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
	}
	return nil
}
