//go:build !linux

package recording

import (
	"errors"
	"os"
)

// The file's portable half: every write goes through the page cache, by
// the writer goroutine. Direct I/O, allocation ahead and asynchronous
// writes are Linux's (file_linux.go).

// aioRing exists on Linux alone; a file here never has one.
type aioRing struct{}

func newAIORing(int) (*aioRing, error) { return nil, errors.ErrUnsupported }

func (*aioRing) destroy() {}

func (w *file) setDirect(bool) error { return errors.ErrUnsupported }

func (w *file) ahead(int64) error { return errors.ErrUnsupported }

// pwritev, collect and finish serve asynchronous writes: without an
// aioRing nothing is submitted, so nothing is in flight.
func (w *file) pwritev(inflight) error { return errors.ErrUnsupported }

func (w *file) collect(bool) error { return nil }

func (w *file) finish(int64) error { return nil }

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
