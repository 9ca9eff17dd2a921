// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/internal/wire"
)

// Keepalive is how a session watches its WebSocket: a ping every
// PingPeriod, the peer taken as gone after PingPeriod+PongTimeout without
// a message, every write bounded by WriteTimeout. At the client a zero
// value disables each; at the node it takes the kubelet's streaming
// default (wire.DefaultLimits), as every other session there does.
type Keepalive struct {
	PingPeriod, PongTimeout, WriteTimeout time.Duration
}

// mux is what both ends share: the WebSocket, the live connections and
// associations by id, and the session's end. Every goroutine a session
// starts is counted in wg and ends when done closes.
//
// The WebSocket is read by readLoop alone. At the node it is
// internal/wire's Conn (wc), the reader, writer and keepalive every
// server-side session of kubestream's uses: writes serialised and bounded
// by WriteTimeout, a frame's payload written after its header with no
// copy, pings on a timer. At the client it is gorilla's connection (ws),
// written under wmu: wire reads only a client's (masked) frames. Exactly
// one of wc and ws is set.
type mux struct {
	wc       *wire.Conn
	lim      wire.Limits // wc's
	ws       *websocket.Conn
	ka       Keepalive
	wmu      sync.Mutex // ws's writes
	wbuf     []byte     // under wmu
	mu       sync.Mutex
	conns    map[uint32]*stream
	udp      map[uint32]*assoc
	wg       sync.WaitGroup
	done     chan struct{}
	once     sync.Once
	err      error         // why the session ended; set once, before done closes
	up, down atomic.Uint64 // payload bytes client→node and node→client
	node     bool
	// The node's charges for what a connection or association holds: a
	// descriptor each from budget (nil: none), and a Window of reserved
	// bytes for each connection (under mu).
	budget   Descriptors
	reserved int
}

// giveDescriptor gives back the descriptor a node's connection or
// association took from budget.
func (m *mux) giveDescriptor() {
	if m.budget != nil {
		m.budget.Give()
	}
}

// newMux starts a session's shared state on ws: the node's (node true)
// taken over by a wire.Conn with its keepalive and idle timeout (0:
// none), the client's read through gorilla.
func newMux(ws *websocket.Conn, ka Keepalive, node bool, idle time.Duration) *mux {
	m := &mux{ka: ka, conns: map[uint32]*stream{}, udp: map[uint32]*assoc{}, done: make(chan struct{}), node: node}
	if !node {
		ws.SetReadLimit(MaxFrame)
		m.ws = ws
		return m
	}
	m.lim = wire.Limits{IdleTimeout: idle, PingPeriod: ka.PingPeriod, PongTimeout: ka.PongTimeout,
		WriteTimeout: ka.WriteTimeout, MaxMessageSize: MaxFrame}.WithDefaults()
	m.wc = wire.NewConn(ws, &m.lim)
	m.wc.StartKeepalive(nil, func() { m.end(fmt.Errorf("idle timeout: no data for %s", idle), true) })
	return m
}

// errClosed is a write on a session that already ended.
var errClosed = errors.New("port-forward session closed")

// send writes one frame; a failed write ends the session, on the caller's
// goroutine once the writer lock is released.
func (m *mux) send(f Frame) error {
	err := m.write(f)
	if err != nil && !errors.Is(err, errClosed) {
		m.end(fmt.Errorf("writing to the WebSocket: %w", err), false)
	}
	return err
}

// write writes one frame under the writer lock (errClosed once the session
// ended). end writes its error frame through it, not send: a failed write
// there must not end the session again from inside end.
func (m *mux) write(f Frame) error {
	if m.wc != nil {
		if m.isDone() {
			return errClosed
		}
		var head [maxHead]byte
		err := m.wc.WritePrefixed(f.appendHead(head[:0]), f.body())
		if errors.Is(err, wire.ErrSessionClosed) {
			return errClosed
		}
		return err
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if m.isDone() {
		return errClosed
	}
	m.wbuf = f.Append(m.wbuf[:0])
	if m.ka.WriteTimeout > 0 {
		_ = m.ws.SetWriteDeadline(time.Now().Add(m.ka.WriteTimeout)) // a closed conn fails the write below
	}
	return m.ws.WriteMessage(websocket.BinaryMessage, m.wbuf)
}

// carried counts payload. (The node's idle timeout is wire.Conn's, which
// counts the frames itself; the client has none.)
func (m *mux) carried(n int, fromNode bool) {
	if fromNode {
		m.down.Add(uint64(n))
	} else {
		m.up.Add(uint64(n))
	}
}

// end ends the session once: the peer is told why (an error frame, when
// tell and err), the WebSocket closed with a close frame, every
// connection and association closed. It does not wait for goroutines.
func (m *mux) end(err error, tell bool) {
	m.once.Do(func() {
		if m.wc != nil {
			// The error frame, then the close frame; the read loop sees
			// the client's close reply or the grace's end (wire.Conn).
			var last []byte
			if tell && err != nil {
				last = Frame{Type: TypeError, Payload: text(err.Error())}.Append(nil)
			}
			m.err = err
			close(m.done)
			m.wc.CloseWith(last, websocket.CloseNormalClosure, "")
			m.closeAll()
			return
		}
		if tell && err != nil {
			_ = m.write(Frame{Type: TypeError, Payload: text(err.Error())}) // best effort: the peer may be gone
		}
		m.wmu.Lock()
		m.err = err
		close(m.done)
		deadline := time.Now().Add(time.Second)
		_ = m.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), deadline)
		m.wmu.Unlock()
		// The peer's close frame (or its going away) ends the reader; the
		// deadline bounds the wait for it.
		_ = m.ws.SetReadDeadline(deadline)
		m.closeAll()
	})
}

// closeAll closes every connection and association at the session's end.
func (m *mux) closeAll() {
	m.mu.Lock()
	conns, assocs := m.conns, m.udp
	m.conns, m.udp = map[uint32]*stream{}, map[uint32]*assoc{}
	m.mu.Unlock()
	for _, s := range conns {
		s.finish("session closed", false)
	}
	for _, a := range assocs {
		a.close()
	}
}

// keepalive pings the node every PingPeriod (> 0) until the session
// ends: the client's (the node's is wire.Conn's timer).
func (m *mux) keepalive() {
	defer m.wg.Done()
	t := time.NewTicker(m.ka.PingPeriod)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		m.wmu.Lock()
		err := m.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(max(m.ka.WriteTimeout, time.Second)))
		m.wmu.Unlock()
		if err != nil {
			m.end(fmt.Errorf("pinging the peer: %w", err), false)
			return
		}
	}
}

// extendRead pushes the read deadline out after any sign of life.
func (m *mux) extendRead() {
	if m.ka.PingPeriod > 0 && m.ka.PongTimeout > 0 {
		select {
		case <-m.done: // end set its own deadline
		default:
			_ = m.ws.SetReadDeadline(time.Now().Add(m.ka.PingPeriod + m.ka.PongTimeout))
		}
	}
}

// readLoop reads frames until the session ends and hands each to handle,
// which must never block on a slow local peer. The loop is the only
// reader of the WebSocket.
func (m *mux) readLoop(handle func(Frame) error) error {
	if m.ws != nil {
		m.ws.SetPongHandler(func(string) error { m.extendRead(); return nil })
		m.extendRead()
	}
	buf := make([]byte, MaxFrame+1)
	for {
		var typ int
		var r io.Reader
		var err error
		switch {
		case m.wc != nil: // moves its read deadline on itself
			typ, r, err = m.wc.NextReader()
		default:
			if typ, r, err = m.ws.NextReader(); err == nil {
				m.extendRead()
			}
		}
		if err != nil {
			return err
		}
		if typ != websocket.BinaryMessage {
			return fmt.Errorf("%w: text message", ErrFrame)
		}
		var f Frame
		if f, buf, err = ReadFrame(r, buf); err != nil {
			return err
		}
		if err := handle(f); err != nil {
			return err
		}
	}
}

// stopOnContext ends the session when ctx ends, telling the peer the
// context's cause.
func (m *mux) stopOnContext(ctx context.Context) {
	defer m.wg.Done()
	select {
	case <-ctx.Done():
		m.end(context.Cause(ctx), true)
	case <-m.done:
	}
}

// spawn starts a goroutine the session owns (counted in wg).
func (m *mux) spawn(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

// closeConn closes a local connection, with a reset (RST) when abrupt, so
// the local peer sees the same kind of end as the far one.
func closeConn(c net.Conn, abrupt bool) {
	if tc, ok := c.(*net.TCPConn); ok && abrupt {
		_ = tc.SetLinger(0) // only fails on a closed conn
	}
	_ = c.Close() // done with it: a failed close changes nothing
}

// isDone: the session has ended.
func (m *mux) isDone() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}
