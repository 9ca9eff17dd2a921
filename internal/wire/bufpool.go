// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import "sync"

// Copy buffers are borrowed per message or frame and returned at once, so
// a session waiting for data holds none: what an idle session costs is its
// connections' small bufio buffers and two goroutine stacks.
var bufPools sync.Map // size → *sync.Pool of *[]byte

// GetBuf borrows a buffer of exactly size bytes, with ReadBufSize of
// capacity behind them: a StagedReader reading a frame's payload into it
// runs on into that room and so takes the next frame's header in the same
// read (without it, a payload that fills the buffer costs a read more per
// frame). PutBuf returns it.
func GetBuf(size int) *[]byte {
	p, ok := bufPools.Load(size)
	if !ok {
		// Loaded or stored, p is the pool.
		p, _ = bufPools.LoadOrStore(size, &sync.Pool{New: func() any {
			b := NewBuf(size)
			return &b
		}})
	}
	return p.(*sync.Pool).Get().(*[]byte)
}

// PutBuf returns a buffer GetBuf lent.
func PutBuf(b *[]byte) {
	if p, ok := bufPools.Load(len(*b)); ok {
		p.(*sync.Pool).Put(b)
	}
}

// NewBuf makes a buffer of size bytes with ReadBufSize of capacity behind
// them, as GetBuf lends (why there).
func NewBuf(size int) []byte { return make([]byte, size, size+ReadBufSize) }
