// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// stream is one forwarded TCP connection at either end. Inbound data waits
// in in, at most Window bytes (the credit this end granted), so the reader
// loop never blocks on a slow local peer; a writer goroutine drains it and
// grants the credit again. Outbound, a reader goroutine sends no more than
// the credit the peer granted.
type stream struct {
	m    *mux
	id   uint32
	mu   sync.Mutex
	cond *sync.Cond
	conn net.Conn // nil until the client's local dial succeeds

	credit   int      // bytes this end may still send
	granted  int      // bytes the peer may still send
	in       [][]byte // received, not yet written out
	inEOF    bool     // the peer half-closed
	ends     int      // directions finished (2: the stream is over)
	dead     bool
	fromNode bool // inbound bytes come from the node (client end)
}

// minChunk is the first chunk a connection's queued data is held in.
const minChunk = 512

// fullChunks recycles chunks of MaxData: in a bulk transfer every data
// frame fills one, written out and dropped a moment later, which without
// the pool is a 32 KiB allocation a frame for the garbage collector.
var fullChunks = sync.Pool{New: func() any { return new([MaxData]byte) }}

// newChunk is an empty chunk of capacity size (from the pool at MaxData).
func newChunk(size int) []byte {
	if size == MaxData {
		return fullChunks.Get().(*[MaxData]byte)[:0]
	}
	return make([]byte, 0, size)
}

func (m *mux) newStream(id uint32, conn net.Conn) *stream {
	s := &stream{m: m, id: id, conn: conn, credit: Window, granted: Window, fromNode: !m.node}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// start runs both directions of an attached stream.
func (s *stream) start() {
	s.m.spawn(s.upstream)
	s.m.spawn(s.downstream)
}

// deliver queues data from the peer (reader loop; never blocks).
func (s *stream) deliver(p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return nil // in flight when it ended
	}
	if s.inEOF || len(p) > s.granted {
		return fmt.Errorf("%w: connection %d: data past the window or after close-write", ErrFrame, s.id)
	}
	s.granted -= len(p)
	// Copied into chunks filled end to end, so what is held is the bytes
	// queued (at most a Window) and at most a chunk more, however small the
	// frames: one allocation a frame would hold 8 MiB for a Window of
	// one-byte frames. A chunk is twice the one before it, up to MaxData,
	// so a short connection's few bytes cost a small allocation, not a
	// MaxData one.
	for len(p) > 0 {
		last := len(s.in) - 1
		if last < 0 || len(s.in[last]) == cap(s.in[last]) {
			size := minChunk
			if last >= 0 {
				size = min(MaxData, 2*cap(s.in[last]))
			}
			s.in = append(s.in, newChunk(max(size, min(len(p), MaxData))))
			last++
		}
		c := s.in[last]
		k := copy(c[len(c):cap(c)], p)
		s.in[last], p = c[:len(c)+k], p[k:]
	}
	s.cond.Broadcast()
	return nil
}

// control applies a window, close-write, reset or error frame from the peer.
func (s *stream) control(f Frame) error {
	switch f.Type {
	case TypeWindow:
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.credit += int(f.Credit); s.credit > Window {
			return fmt.Errorf("%w: connection %d: credit above the window", ErrFrame, s.id)
		}
	case TypeCloseWrite:
		s.mu.Lock()
		defer s.mu.Unlock()
		s.inEOF = true
	default: // reset, error
		s.finish(string(f.Payload), false)
		return nil
	}
	s.cond.Broadcast()
	return nil
}

// upstream: local reads → data frames, within the peer's credit; local
// EOF → close-write; a local error → reset.
func (s *stream) upstream() {
	buf := make([]byte, MaxData)
	for {
		s.mu.Lock()
		for s.credit == 0 && !s.dead {
			s.cond.Wait()
		}
		n, dead := min(s.credit, MaxData), s.dead
		s.mu.Unlock()
		if dead {
			return
		}
		n, err := s.conn.Read(buf[:n])
		if n > 0 {
			s.mu.Lock()
			s.credit -= n
			s.mu.Unlock()
			s.m.carried(n, !s.fromNode)
			if s.m.send(Frame{Type: TypeData, ID: s.id, Payload: buf[:n]}) != nil {
				return
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			if s.m.send(Frame{Type: TypeCloseWrite, ID: s.id}) == nil {
				s.oneEnd()
			}
			return
		case err != nil:
			s.finish(err.Error(), true)
			return
		}
	}
}

// downstream: queued data → local writes, the credit granted again as it
// goes out; the peer's close-write → a local half-close.
func (s *stream) downstream() {
	consumed := 0
	for {
		s.mu.Lock()
		for len(s.in) == 0 && !s.inEOF && !s.dead {
			s.cond.Wait()
		}
		if s.dead {
			s.mu.Unlock()
			return
		}
		if len(s.in) == 0 { // inEOF, all written
			s.mu.Unlock()
			halfClose(s.conn)
			s.oneEnd()
			return
		}
		p := s.in[0]
		s.in = s.in[1:]
		s.mu.Unlock()
		_, err := s.conn.Write(p)
		n := len(p)
		if cap(p) == MaxData { // written: nothing else holds it
			fullChunks.Put((*[MaxData]byte)(p[:MaxData]))
		}
		if err != nil {
			s.finish(err.Error(), true)
			return
		}
		s.m.carried(n, s.fromNode)
		consumed += n
		s.mu.Lock()
		idle := len(s.in) == 0
		if consumed >= Window/4 || idle {
			s.granted += consumed
		}
		s.mu.Unlock()
		if consumed >= Window/4 || idle {
			if s.m.send(Frame{Type: TypeWindow, ID: s.id, Credit: uint32(consumed)}) != nil {
				return
			}
			consumed = 0
		}
	}
}

// oneEnd marks a direction finished; after both, the stream is over.
func (s *stream) oneEnd() {
	s.mu.Lock()
	s.ends++
	over := s.ends == 2
	s.mu.Unlock()
	if over {
		s.release(false)
	}
}

// finish ends the stream abruptly: the local connection reset, the peer
// told (tell) with a reset carrying reason.
func (s *stream) finish(reason string, tell bool) {
	if !s.release(true) {
		return
	}
	if tell {
		_ = s.m.send(Frame{Type: TypeReset, ID: s.id, Payload: text(reason)}) // the session's end covers a failure
	}
}

// release closes the stream once (false if it already was).
func (s *stream) release(abrupt bool) bool {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return false
	}
	s.dead = true
	s.in = nil
	s.cond.Broadcast()
	conn := s.conn
	s.mu.Unlock()
	if conn != nil {
		closeConn(conn, abrupt)
	}
	s.m.mu.Lock()
	delete(s.m.conns, s.id)
	if s.m.node { // every node stream was charged by admitConn
		s.m.reserved -= Window
	}
	s.m.mu.Unlock()
	if s.m.node {
		s.m.giveDescriptor()
	}
	return true
}

func halfClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite() // a failure shows on the next read or write
	}
}
