// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
)

// Limits of one tunnel's streams.
const (
	// inboxSize bounds the client bytes a stream holds that the runtime has
	// not read yet; a full inbox makes the tunnel's reader wait, as a full
	// TCP window would. An idle stream holds no inbox.
	inboxSize = 64 << 10
	// maxDataChunk is the largest data frame written; the runtime's writes
	// are cut to it so the client's reader, which allocates per frame,
	// never holds more.
	maxDataChunk = 32 << 10
)

var (
	errStreamReset  = errors.New("port-forward stream reset")
	errStreamClosed = errors.New("port-forward stream closed for writing")
)

// pfStream is one SPDY stream of a tunnel, the io.ReadWriteCloser the
// runtime's PortForward gets. The tunnel's reader fills its inbox; the
// runtime's goroutine reads it and writes.
type pfStream struct {
	wc      *wire.Conn
	id      uint32
	headers http.Header

	mu     sync.Mutex
	cond   sync.Cond // room in the inbox, bytes in it, or an end
	buf    *[]byte   // the inbox's storage, borrowed while it holds bytes
	in     []byte    // client bytes not read yet: (*buf)[off:len(in)]
	off    int
	inEOF  bool // the client half-closed the stream
	unread bool // an error stream: client bytes are dropped
	ended  bool // reset by either side, forwarded, or the session ended
	// clientReset: the client reset the stream (RST_STREAM), as client-go
	// does when the local connection it forwards goes away.
	clientReset bool
	finSent     bool
}

func (st *pfStream) resetByClient() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.clientReset
}

// push waits for room and queues p; bytes for an ended stream are dropped.
// It reports a stall: the runtime read nothing for stallLimit while the
// inbox was full. The tunnel's one reader waits here for every stream, so
// a runtime that stops reading would hold the whole session, and with it
// the only place a vanished client is noticed; past the limit the stream is
// reset instead. The limit is half the liveness window, so the reader is
// back before its own read deadline passes.
func (st *pfStream) push(p []byte, stallLimit time.Duration) (stalled bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for len(p) > 0 && !st.unread {
		if !st.ended && len(st.in)-st.off == inboxSize {
			timedOut := false
			timer := time.AfterFunc(stallLimit, func() {
				st.mu.Lock()
				timedOut = true
				st.cond.Broadcast()
				st.mu.Unlock()
			})
			for !st.ended && !timedOut && len(st.in)-st.off == inboxSize {
				st.cond.Wait()
			}
			timer.Stop()
			if timedOut && !st.ended && len(st.in)-st.off == inboxSize {
				return true
			}
		}
		if st.ended {
			return false
		}
		if st.buf == nil {
			st.buf = wire.GetBuf(inboxSize)
			st.in = (*st.buf)[:0]
		} else if st.off > 0 {
			st.in = st.in[:copy(st.in, st.in[st.off:])]
			st.off = 0
		}
		k := min(len(p), inboxSize-len(st.in))
		st.in = append(st.in, p[:k]...)
		p = p[k:]
		st.cond.Broadcast()
	}
	return false
}

func (st *pfStream) finRead() {
	st.mu.Lock()
	st.inEOF = true
	st.cond.Broadcast()
	st.mu.Unlock()
}

// end stops the stream without a word to the client (it reset the stream,
// or the forward or the session is over); it returns the inbox.
func (st *pfStream) end() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ended = true
	st.release()
	st.cond.Broadcast()
}

func (st *pfStream) release() {
	if st.buf != nil {
		wire.PutBuf(st.buf)
		st.buf, st.in, st.off = nil, nil, 0
	}
}

func (st *pfStream) Read(p []byte) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for !st.ended && !st.inEOF && len(st.in) == st.off {
		st.cond.Wait()
	}
	switch {
	case len(st.in) > st.off:
		n := copy(p, st.in[st.off:])
		if st.off += n; st.off == len(st.in) {
			st.release() // an idle stream holds no buffer
		}
		st.cond.Broadcast()
		return n, nil
	case st.ended:
		return 0, errStreamReset
	default:
		return 0, io.EOF
	}
}

// Write sends p as data frames.
func (st *pfStream) Write(p []byte) (int, error) {
	var h [spdy.HeaderLen]byte
	written := 0
	for len(p) > 0 {
		st.mu.Lock()
		ended, fin := st.ended, st.finSent
		st.mu.Unlock()
		if ended {
			return written, errStreamReset
		}
		if fin {
			return written, errStreamClosed
		}
		k := min(len(p), maxDataChunk)
		spdy.PutDataHeader(h[:], st.id, k, false)
		if err := st.wc.WritePrefixed(h[:], p[:k]); err != nil {
			return written, err
		}
		written += k
		p = p[k:]
	}
	return written, nil
}

// Close half-closes the stream: the client reads EOF. A stream that ended
// (reset by either side, or the session is over) sends nothing more.
func (st *pfStream) Close() error {
	st.mu.Lock()
	done := st.finSent || st.ended
	st.finSent = true
	st.mu.Unlock()
	if done {
		return nil
	}
	var h [spdy.HeaderLen]byte
	spdy.PutDataHeader(h[:], st.id, 0, true)
	return st.wc.WriteFrame(h[:])
}

// Reset ends the stream and tells the client.
func (st *pfStream) Reset() error {
	st.end()
	return writeReset(st.wc, st.id, spdy.StatusCancel)
}

// writeReset resets stream id with status (RST_STREAM).
func writeReset(wc *wire.Conn, id uint32, status uint32) error {
	frame := spdy.AppendControl(make([]byte, 0, spdy.HeaderLen+8), spdy.TypeRstStream, 0, 8)
	frame = binary.BigEndian.AppendUint32(frame, id)
	frame = binary.BigEndian.AppendUint32(frame, status)
	return wc.WriteFrame(frame)
}
