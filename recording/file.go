package recording

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// align is what direct I/O asks of a write's memory, length and file
// offset: the logical block size of every disk in use (512 or 4096).
const align = 4096

// file is a recording's file, written at explicit offsets. Whole aligned
// blocks go with O_DIRECT where the file system allows it, past the page
// cache: a recording is written once and rarely read, and copying it into
// the page cache (and allocating pages for it) cost a bulk session more
// than encoding it, and pushed out pages the node needs. The tail that
// does not fill a block is written through the page cache when the session
// goes quiet or ends, and again, whole, with the block it begins. Without
// O_DIRECT every byte goes through the page cache.
type file struct {
	f      *os.File
	fd     int
	direct bool  // O_DIRECT is set
	off    int64 // where the next write goes: every byte before it is written
}

// createFile creates path, which must not exist, with direct I/O if
// asked and the file system has it.
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
