// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// rawNode serves one node end to a raw WebSocket the test writes frames
// on itself, as a client of its own would.
func rawNode(t *testing.T, cfg NodeConfig) (*websocket.Conn, chan NodeResult) {
	t.Helper()
	res := make(chan NodeResult, 1)
	up := websocket.Upgrader{Subprotocols: []string{ReverseProtocol, UDPProtocol}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		res <- ServeNode(context.Background(), ws, cfg)
	}))
	t.Cleanup(srv.Close)
	ws, _, err := (&websocket.Dialer{Subprotocols: []string{UDPProtocol}}).Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, res
}

func waitResult(t *testing.T, res chan NodeResult) NodeResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("the node did not end the session")
		return NodeResult{}
	}
}

// A client that floods refused association opens and never reads its
// answers: the refusals wait in one bounded queue (no goroutine each), and
// the session ends with a protocol error once the queue is full.
func TestRefusalFloodIsBounded(t *testing.T) {
	noLeaks(t)
	// The session's end waits for a client that reads nothing for a write
	// timeout (its error and close frames), then for its close reply for
	// a liveness window (ping period and pong timeout): a second each
	// here, not the kubelet's 10 s and 90 s.
	ws, res := rawNode(t, NodeConfig{UDPPorts: []uint16{9}, UDP: loopDialer{},
		Keepalive: Keepalive{PingPeriod: time.Second, PongTimeout: time.Second, WriteTimeout: time.Second}})
	base := runtime.NumGoroutine()
	var peak atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() { // samples until the test ends
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if g := int64(runtime.NumGoroutine()); g > peak.Load() {
				peak.Store(g)
			}
		}
	}()
	var sent int
	for id := uint32(1); id <= 300_000; id++ { // port 7 is not in the session: each one refused
		if ws.WriteMessage(websocket.BinaryMessage, Frame{Type: TypeAssocOpen, ID: id, Port: 7}.Append(nil)) != nil {
			break // the node ended the session
		}
		sent++
	}
	r := waitResult(t, res)
	if r.Err == nil || !errors.Is(r.Err, ErrFrame) {
		t.Fatalf("the flood ended with %v, want a protocol error", r.Err)
	}
	if p := peak.Load() - int64(base); p > 20 {
		t.Fatalf("%d refused opens sent: goroutines rose by %d", sent, p)
	}
}

// An id opened again, or an association id that does not rise, or a frame
// for a connection or association never opened, is a protocol error.
func TestUnknownAndReusedIdsEndTheSession(t *testing.T) {
	noLeaks(t)
	for name, frames := range map[string][]Frame{
		"reopened association": {{Type: TypeAssocOpen, ID: 5, Port: 7}, {Type: TypeAssocOpen, ID: 5, Port: 7}},
		"falling ids":          {{Type: TypeAssocOpen, ID: 5, Port: 7}, {Type: TypeAssocOpen, ID: 4, Port: 7}},
		"datagram, never open": {{Type: TypeDatagram, ID: 3, Payload: []byte("x")}},
		"data, never open":     {{Type: TypeData, ID: 3, Payload: []byte("x")}},
		"window, never open":   {{Type: TypeWindow, ID: 9, Credit: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			ws, res := rawNode(t, NodeConfig{UDPPorts: []uint16{9}, UDP: loopDialer{}})
			go func() { // reads, as a client does: the node's close gets its reply
				for {
					if _, _, err := ws.NextReader(); err != nil {
						return
					}
				}
			}()
			for _, f := range frames {
				_ = ws.WriteMessage(websocket.BinaryMessage, f.Append(nil)) // the node may have ended it already
			}
			if r := waitResult(t, res); !errors.Is(r.Err, ErrFrame) {
				t.Fatalf("ended with %v, want a protocol error", r.Err)
			}
		})
	}
}

// A window of one-byte frames held for a pod peer that does not read is
// held in chunks, not one allocation a frame: about a window of heap.
func TestOneByteFramesHoldAboutAWindow(t *testing.T) {
	m := &mux{node: true}
	s := m.newStream(1, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := []byte{'x'}
	for range Window {
		if err := s.deliver(b); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if held > 2*Window {
		t.Fatalf("a window (%d bytes) of one-byte frames holds %d bytes of heap", Window, held)
	}
	total := 0
	for _, c := range s.in {
		total += len(c)
	}
	if total != Window {
		t.Fatalf("%d bytes queued, want %d", total, Window)
	}
	runtime.KeepAlive(s)
}

// Connection ids skip 0 and live entries when they wrap.
func TestConnectionIdsNeverWrapIntoALiveEntry(t *testing.T) {
	n := &node{mux: &mux{node: true, conns: map[uint32]*stream{}, done: make(chan struct{})}}
	n.lastConn = ^uint32(0) - 1
	n.mux.conns[^uint32(0)] = &stream{}
	n.mux.conns[1] = &stream{}
	id, over, full := n.admitConn()
	if over || full || id != 2 {
		t.Fatalf("after max-1 with max and 1 live: id %d (over %v, full %v), want 2", id, over, full)
	}
	if !n.wrapped {
		t.Fatal("the wrap is not remembered")
	}
}

// budget is a descriptor budget of n.
type budget struct{ left, given atomic.Int64 }

func (b *budget) Take() bool {
	if b.left.Add(-1) < 0 {
		b.left.Add(1)
		return false
	}
	return true
}
func (b *budget) Give() { b.left.Add(1); b.given.Add(1) }

// A session's buffered bytes and the node's descriptors bound its
// connections: past either, a pod connection is reset and counted refused,
// and every descriptor taken is given back at the end.
func TestSessionCapsRefuseConnections(t *testing.T) {
	for name, cfg := range map[string]func(*NodeConfig, *budget){
		"buffered bytes": func(c *NodeConfig, _ *budget) { c.MaxBuffered = 2 * Window },
		"descriptors":    func(c *NodeConfig, b *budget) { b.left.Store(2); c.Descriptors = b },
	} {
		t.Run(name, func(t *testing.T) {
			noLeaks(t)
			stuck := make(chan struct{})
			var unstick sync.Once
			local := serveLocal(t, func(_ int, c net.Conn) { <-stuck; c.Close() })
			t.Cleanup(func() { unstick.Do(func() { close(stuck) }) }) // before serveLocal's, which waits for these
			l, port := listen(t)
			var b budget
			b.left.Store(100)
			nc := NodeConfig{Listeners: []Listener{{Port: port, L: l}}}
			cfg(&nc, &b)
			ready := make(chan uint16, 1)
			p := startPair(t, nc, ClientConfig{Reverse: []ReverseForward{{Remote: port, Local: local}}, Ready: ready}, ReverseProtocol)
			waitReady(t, ready, 1)
			var conns []net.Conn
			for range 2 {
				c, err := net.Dial("tcp", l.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			// The third is over the cap: reset at once (the reset can beat
			// the dial's own look at its socket).
			third, err := net.Dial("tcp", l.Addr().String())
			if err == nil {
				_ = third.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err = third.Read(make([]byte, 1)); err == nil {
					t.Fatal("a connection over the cap was served")
				}
				third.Close()
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("a connection over the cap was held, not refused")
			}
			unstick.Do(func() { close(stuck) })
			for _, c := range conns {
				c.Close()
			}
			res := p.stop(t)
			if res.Refused < 1 || res.Conns != 2 {
				t.Errorf("node result %+v", res)
			}
			if nc.Descriptors != nil && b.left.Load() != 2 {
				t.Errorf("%d descriptors left after the session, want the 2 it had", b.left.Load())
			}
		})
	}
}
