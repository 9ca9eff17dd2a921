// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package recording

import "fmt"

// flushTimer hands the writer the current block too, flushDelay after an
// event, unless the session is busy: then its partial block goes out with
// the next writeSize, and writing it alone now would leave a page in the
// page cache for the next direct write to take out again (twenty times a
// second on a bulk session). The timer waits another flushDelay instead,
// so every event is on disk within twice flushDelay.
func (r *Recorder) flushTimer() {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
	case r.moved:
		r.moved = false
		r.flush.Reset(flushDelay)
	default:
		r.flushed = true
		r.kick()
	}
}

// stop ends the recording for err, the first one (mu held).
func (r *Recorder) stop(err error) {
	if r.stopped == nil {
		r.stopped = fmt.Errorf("recording stopped: %w", err)
	}
}

// kick wakes the writer (mu held); after Close there is none.
func (r *Recorder) kick() {
	if r.closed {
		return
	}
	select {
	case r.wake <- struct{}{}:
	default: // already awake, or about to be
	}
}

// take hands the writer the filled blocks and, after flushDelay or at
// Close, the current one (mu held): its aligned part as a block, the rest
// as tail, which is also where the next block begins (a direct write
// takes it again, whole). The writer owns tail's bytes until its next take.
// quiet says the session went quiet or ended: the blocks go back to spare
// once written, not to this recording's own.
func (r *Recorder) take(tail []byte) (full [][]byte, _ []byte, quiet bool) {
	full, r.full = r.full, nil
	tail = tail[:0]
	if !r.flushed && !r.closed {
		for _, b := range full {
			r.queued -= len(b)
		}
		return full, tail, false
	}
	r.flushed, r.armed = false, false
	// Quiet or closed: the blocks this recording kept go back to spare, so
	// an idle recording holds none.
	for _, b := range r.free {
		putBlock(b)
	}
	r.free = nil
	if r.cur != nil {
		k := r.cut()
		tail = append(tail, r.cur[k:]...)
		r.carry = append(r.carry[:0], tail...)
		if k > 0 {
			full = append(full, r.cur[:k])
		} else {
			putBlock(r.cur) // only once its tail is copied: another recording may take it
		}
		r.cur = nil
	}
	r.queued = 0
	return full, tail, true
}

// write is the recording's writer: at each wake it takes the blocks filled
// so far and writes them, until Close. After a failed write it writes no
// more.
func (r *Recorder) write(f *file) {
	var tail []byte
	var werr error
	for open := true; open && werr == nil; {
		_, open = <-r.wake
		r.mu.Lock()
		var full [][]byte
		var quiet bool
		full, tail, quiet = r.take(tail)
		r.mu.Unlock()
		werr = f.write(full)
		if werr == nil && len(tail) > 0 {
			werr = f.writeTail(tail)
		}
		r.mu.Lock()
		for _, b := range full {
			if quiet || r.closed {
				putBlock(b)
			} else if cap(b) == blockSize {
				r.free = append(r.free, b[:0])
			}
		}
		if werr != nil {
			r.stop(werr)
		}
		r.direct = f.direct // a refused direct write turned it off
		r.mu.Unlock()
	}
	for range r.wake { // until Close
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	r.done <- werr
}
