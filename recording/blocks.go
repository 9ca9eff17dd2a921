// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package recording

import "sync"

// blockSize is the unit the session encodes into and the writer writes
// (writeSize of them at once): no buffer ever grows (growing one copied
// every byte again and again on a bulk session).
const blockSize = 128 << 10

// spare keeps written blocks for the next ones, every recording's, up to
// maxSpare of them (kept for the process's life once a bulk recording has
// used them). Fresh memory costs a page fault per 4 KiB and a garbage
// collection every few MiB, which showed as a large share of a bulk
// recording's cost; a sync.Pool is emptied by every garbage collection. A
// busy recording keeps its own written blocks (Recorder.free) while it
// stays busy, so one whose disk lags by more than maxSpare reuses its
// blocks rather than allocating anew.
var spare struct {
	sync.Mutex
	blocks stack
}

// stack is written blocks to fill again, the last written first.
type stack [][]byte

// pop takes the last block, or nil when there is none.
func (s *stack) pop() []byte {
	n := len(*s)
	if n == 0 {
		return nil
	}
	b := (*s)[n-1]
	(*s)[n-1] = nil
	*s = (*s)[:n-1]
	return b
}

const maxSpare = 8 << 20 / blockSize

func getBlock() []byte {
	spare.Lock()
	defer spare.Unlock()
	if b := spare.blocks.pop(); b != nil {
		return b
	}
	return make([]byte, 0, blockSize)
}

func putBlock(b []byte) {
	if cap(b) != blockSize {
		return
	}
	spare.Lock()
	defer spare.Unlock()
	if len(spare.blocks) < maxSpare {
		spare.blocks = append(spare.blocks, b[:0])
	}
}

// room makes sure the current block has at least n bytes free (n is
// small), starting a new one if not (mu held). A filled block is cut where
// its last aligned block ends while the file takes direct I/O, the rest
// beginning the next.
func (r *Recorder) room(n int) {
	if r.cur != nil && cap(r.cur)-len(r.cur) >= n {
		return
	}
	next := r.free.pop()
	if next == nil {
		next = getBlock()
	}
	next = append(next, r.carry...)
	r.queued += len(r.carry)
	r.carry = r.carry[:0]
	if r.cur != nil {
		k := r.cut()
		next = append(next, r.cur[k:]...)
		r.full = append(r.full, r.cur[:k])
	}
	r.cur = next
}

// cut is how much of cur a direct write may take: its aligned blocks.
func (r *Recorder) cut() int {
	if r.direct {
		return len(r.cur) &^ (align - 1)
	}
	return len(r.cur)
}

// put appends b to the blocks (mu held).
func (r *Recorder) put(b []byte) {
	for len(b) > 0 {
		r.room(1)
		n := copy(r.cur[len(r.cur):cap(r.cur)], b)
		r.cur, b = r.cur[:len(r.cur)+n], b[n:]
		r.queued += n
	}
}
