package wire

import "sync"

// Copy buffers are borrowed per message or frame and returned at once, so
// a session waiting for data holds none: what an idle session costs is its
// connections' small bufio buffers and two goroutine stacks.
var bufPools sync.Map // size → *sync.Pool of *[]byte

// GetBuf borrows a buffer of exactly size bytes; PutBuf returns it.
func GetBuf(size int) *[]byte {
	p, ok := bufPools.Load(size)
	if !ok {
		// Loaded or stored, p is the pool.
		p, _ = bufPools.LoadOrStore(size, &sync.Pool{New: func() any {
			b := make([]byte, size)
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
