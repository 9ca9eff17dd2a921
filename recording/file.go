package recording

import "os"

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
//
// Where the kernel has it, direct writes are asynchronous (aio): the
// session's goroutine submits each one itself and collects it later, with
// no writer goroutine to wake. The file is allocated (and sized) ahead of
// them, since a write past the end waits for the disk; Close cuts it to
// what was written, and until then it ends in zeros.
type file struct {
	f      *os.File
	fd     int
	direct bool  // O_DIRECT is set
	off    int64 // where the next write goes: every byte before it is written (or, with aio, submitted)

	aio      *aioRing   // asynchronous writes; nil: synchronous ones, by the writer goroutine
	alloc    int64      // with aio, the file is allocated and sized up to here
	inflight []inflight // with aio, writes submitted and not collected, oldest first
	seq      uint64
	nowait   bool // with aio, writes are submitted with RWF_NOWAIT (see aioRing.pwritev)
	waited   int  // writes the kernel refused to queue without waiting, submitted again to wait (tests)
}

// inflight is a submitted write: its blocks are the kernel's until it
// completes.
type inflight struct {
	id     uint64
	bufs   [][]byte
	off    int64
	n      int64 // bytes
	padded bool  // its last block is padded past the data: the next write begins in it
	nowait bool  // submitted with RWF_NOWAIT: refused, it is submitted again
}

// writeMode is how a recording's file is written: asynchronous direct
// writes where the kernel and file system have them (Start), or by a
// writer goroutine, directly or through the page cache (tests, and where
// the others are refused).
type writeMode int

const (
	writeAsync writeMode = iota
	writeDirect
	writeBuffered
)

// maxInflight bounds a recording's asynchronous writes: MaxQueued's worth.
const maxInflight = MaxQueued / writeSize

// createFile creates path, which must not exist, written as mode asks
// where the kernel and file system allow it, and as the next mode where
// not.
func createFile(path string, mode writeMode) (*file, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	w := &file{f: f, fd: int(f.Fd()), nowait: true}
	// Setting O_DIRECT after the open, not in it: a file system without
	// direct I/O refuses it only once the file exists.
	w.direct = mode <= writeDirect && w.setDirect(true) == nil
	if w.direct && mode == writeAsync {
		// A file system that cannot allocate ahead would make each
		// write wait for the disk: then the writer goroutine waits.
		if a, err := newAIORing(maxInflight + 1); err == nil {
			w.aio = a
			if w.ahead(0) != nil {
				a.destroy()
				w.aio = nil
			}
		}
	}
	return w, nil
}

// submit starts writing bufs at off (aio) and moves off on by advance:
// less than their length when the last block is padded past the data.
func (w *file) submit(bufs [][]byte, advance int64, padded bool) error {
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	if err := w.ahead(w.off + n); err != nil {
		return err
	}
	if err := w.pwritev(inflight{bufs: bufs, off: w.off, n: n, padded: padded, nowait: w.nowait}); err != nil {
		return err
	}
	w.off += advance
	return nil
}

// padInFlight says whether a padded block is being written: the next
// write, which begins in it, must wait for it.
func (w *file) padInFlight() bool {
	for _, f := range w.inflight {
		if f.padded {
			return true
		}
	}
	return false
}

// inflightBytes is what the kernel holds of the recording's blocks.
func (w *file) inflightBytes() int {
	n := 0
	for _, f := range w.inflight {
		n += int(f.n)
	}
	return n
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

func (w *file) Close() error {
	if w.aio != nil {
		w.aio.destroy()
	}
	return w.f.Close()
}
