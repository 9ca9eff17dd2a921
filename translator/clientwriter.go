// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/internal/wire"
)

// clientWriter is the client's write side, shared by the down copy (the
// runtime's frames) and the node's own control frames: its pings, its
// answers to the client's pings (the legacy splice's pongs, the SPDY
// relay's PING replies). mu is held only while writing, never across a
// read, so a runtime that stalls mid-frame holds up no control frame. A
// frame that fits the down copy's buffer is read whole first and written
// whole; a larger one goes out in pieces, and while one is half written
// (mid) a control frame waits in due for its end (or a ping is skipped).
type clientWriter struct {
	conn    net.Conn
	timeout time.Duration // a write's deadline; 0: none (the SPDY relay)

	mu       sync.Mutex
	deadline time.Time // the last write deadline the down copy set
	mid      bool      // written by the down copy only, under mu
	// due holds the control frames owed when mid ends: one pong (at most
	// 2+125 bytes), or up to ten SPDY PING replies (12 bytes each).
	due      [128]byte
	nDue     int
	frameEnd *sync.Cond // signalled when mid ends or cut is set
	cut      bool       // the down copy ended mid-frame: the framing is lost
}

// down writes the runtime's bytes p; mid: they end inside a frame. At a
// frame's end the control frames due follow it.
func (w *clientWriter) down(p []byte, mid bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	// The deadline moves at most once per slack, not per write: a deadline
	// set is a timer update in the runtime's poller.
	if w.timeout > 0 {
		if want := time.Now().Add(w.timeout); want.Sub(w.deadline) > wire.Slack(w.timeout) {
			w.deadline = want
			_ = w.conn.SetWriteDeadline(want) // fails only once closed; its I/O then says why
		}
	}
	_, err := w.conn.Write(p)
	w.mid = mid
	if mid {
		return err
	}
	if err == nil && w.nDue > 0 {
		_, err = w.conn.Write(w.due[:w.nDue])
	}
	w.nDue = 0
	if w.frameEnd != nil {
		w.frameEnd.Broadcast()
	}
	return err
}

// control writes one of the node's control frames between the down copy's
// frames: at once, or, while a frame is half written, at its end. keep:
// each one must go (SPDY PING replies, which the client matches by id),
// and when due is full the caller waits for the frame's end as it did
// before due existed; client-go (spdystream) waits for each reply before
// its next PING, so from it one waits at most. Otherwise a frame replaces
// any waiting (pongs: RFC 6455 5.5.3 asks only for the latest).
func (w *clientWriter) control(frame []byte, keep bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for keep && w.mid && !w.cut && w.nDue+len(frame) > len(w.due) {
		if w.frameEnd == nil {
			w.frameEnd = sync.NewCond(&w.mu)
		}
		w.frameEnd.Wait()
	}
	switch {
	case w.cut:
		return nil // nothing can be framed after half a frame
	case !w.mid:
		_, err := w.conn.Write(frame)
		return err
	case !keep:
		w.nDue = 0
	}
	w.nDue += copy(w.due[w.nDue:], frame)
	return nil
}

// downEnded marks the end of the down copy; one that ended mid-frame lost
// the client's framing, so nothing more is written and no one waits.
func (w *clientWriter) downEnded() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mid {
		w.cut = true
		if w.frameEnd != nil {
			w.frameEnd.Broadcast()
		}
	}
}

// pongFor answers a client's ping (payload unmasked) between the
// runtime's frames.
func (w *clientWriter) pongFor(payload []byte) {
	_ = w.control(wire.ServerFrame(nil, websocket.PongMessage, payload), false) // a failed pong is the next read's error to find
}
