//go:build linux

package recording

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// The file's Linux half: direct I/O (O_DIRECT), allocation ahead
// (fallocate), vectored writes at an offset, and asynchronous writes (aio.go).

// ahead allocates the file up to end, if it is not yet: 64 KiB, then
// doubling, then 64 MiB at a time (an idle recording holds little disk, a
// bulk one allocates rarely).
func (w *file) ahead(end int64) error {
	size := w.alloc
	for size < max(end, 1) {
		size += min(max(size, 64<<10), 64<<20)
	}
	if size == w.alloc {
		return nil
	}
	if err := unix.Fallocate(w.fd, 0, w.alloc, size-w.alloc); err != nil {
		return &os.PathError{Op: "allocate", Path: w.f.Name(), Err: err}
	}
	w.alloc = size
	return nil
}

// pwritev submits the write in, and holds it in inflight.
func (w *file) pwritev(in inflight) error {
	iov := w.aio.iov[:0]
	for _, b := range in.bufs {
		iov = append(iov, unix.Iovec{Base: &b[0], Len: uint64(len(b))})
	}
	w.seq++
	in.id = w.seq
	err := w.aio.pwritev(w.fd, iov, in.off, in.id, in.nowait)
	if err == unix.EOPNOTSUPP && in.nowait {
		// A file system that cannot refuse to wait: its writes wait.
		w.nowait, in.nowait = false, false
		err = w.aio.pwritev(w.fd, iov, in.off, in.id, false)
	}
	w.aio.iov = iov
	clear(iov) // the blocks are held by inflight, not here
	if err != nil {
		return &os.PathError{Op: "write", Path: w.f.Name(), Err: err}
	}
	w.inflight = append(w.inflight, in)
	return nil
}

// collect takes the completed writes back, their blocks to the spares;
// with wait, all of them.
func (w *file) collect(wait bool) error {
	var werr error
	for len(w.inflight) > 0 {
		evs, err := w.aio.completed(len(w.inflight), wait)
		if err != nil {
			return &os.PathError{Op: "collect", Path: w.f.Name(), Err: err}
		}
		for _, ev := range evs {
			i := 0
			for w.inflight[i].id != ev.data {
				i++
			}
			done := w.inflight[i]
			w.inflight = slices.Delete(w.inflight, i, i+1) // and lets go of its blocks
			if done.nowait && (ev.res == -int64(unix.EAGAIN) || ev.res >= 0 && ev.res < done.n) && werr == nil {
				// Refused, or cut short, rather than waited for: the
				// same write again (the same bytes at the same place),
				// this time waiting.
				w.waited++
				done.nowait = false
				werr = w.pwritev(done)
				if werr == nil {
					continue
				}
			}
			for _, b := range done.bufs {
				putBlock(b)
			}
			switch {
			case werr != nil:
			case ev.res < 0:
				werr = &os.PathError{Op: "write", Path: w.f.Name(), Err: unix.Errno(-ev.res)}
			case ev.res != done.n:
				werr = &os.PathError{Op: "write", Path: w.f.Name(), Err: unix.EIO}
			}
		}
		if !wait {
			break
		}
	}
	return werr
}

// finish waits for every write and cuts the file at end (aio).
func (w *file) finish(end int64) error {
	werr := w.collect(true)
	if err := unix.Ftruncate(w.fd, end); err != nil && werr == nil {
		werr = &os.PathError{Op: "truncate", Path: w.f.Name(), Err: err}
	}
	return werr
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
