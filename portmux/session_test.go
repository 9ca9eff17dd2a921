// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
)

// noLeaks checks, after every other cleanup, that the test left no
// goroutine behind.
func noLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

// loopDialer dials pod ports on this host's loopback (a host-network pod).
type loopDialer struct{}

func (loopDialer) DialUDP(port uint16) (*net.UDPConn, error) {
	return net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
}

// pair runs a node end (cfg) behind a real HTTP server and a client end
// (ccfg) dialled to it; stop ends the client and waits for both.
type pair struct {
	node   chan NodeResult
	client chan error
	cancel context.CancelCauseFunc
	nodeCx context.CancelCauseFunc
	srv    *httptest.Server
}

func startPair(t *testing.T, cfg NodeConfig, ccfg ClientConfig, proto string) *pair {
	t.Helper()
	p := &pair{node: make(chan NodeResult, 1), client: make(chan error, 1)}
	nctx, ncancel := context.WithCancelCause(context.Background())
	p.nodeCx = ncancel
	up := websocket.Upgrader{Subprotocols: []string{ReverseProtocol, UDPProtocol}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		p.node <- ServeNode(nctx, ws, cfg)
	}))
	d := websocket.Dialer{Subprotocols: []string{proto}}
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(p.srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	p.cancel = cancel
	go func() { p.client <- ServeClient(ctx, ws, ccfg) }()
	return p
}

func (p *pair) stop(t *testing.T) NodeResult {
	t.Helper()
	p.cancel(nil)
	var res NodeResult
	select {
	case err := <-p.client:
		if err != nil {
			t.Errorf("client: %v", err)
		}
		res = <-p.node
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end")
	}
	p.nodeCx(nil)
	p.srv.Close()
	return res
}

// startReverse runs a reverse session with one pod listener forwarded to
// local, ready, with at most maxConns connections (0: no cap).
func startReverse(t *testing.T, local string, maxConns int) (net.Listener, *pair) {
	t.Helper()
	l, port := listen(t)
	ready := make(chan uint16, 1)
	p := startPair(t, NodeConfig{Listeners: []Listener{{port, l}}, MaxConns: maxConns},
		ClientConfig{Pod: "demo", Reverse: []ReverseForward{{port, local}}, Ready: ready}, ReverseProtocol)
	waitReady(t, ready, 1)
	return l, p
}

func waitReady(t *testing.T, ready chan uint16, n int) {
	t.Helper()
	for range n {
		select {
		case <-ready:
		case <-time.After(5 * time.Second):
			t.Fatal("no ready frame")
		}
	}
}

func listen(t *testing.T) (net.Listener, uint16) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l, uint16(l.Addr().(*net.TCPAddr).Port)
}

// serveLocal runs a local TCP service: handle gets each connection.
func serveLocal(t *testing.T, handle func(int, net.Conn)) string {
	t.Helper()
	l, _ := listen(t)
	var wg sync.WaitGroup
	// The accept loop is counted too: a handler's Add then happens while
	// the count is above zero, never beside a Wait that could return.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); handle(i, c) }()
		}
	}()
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String()
}

func echo(_ int, c net.Conn) {
	defer c.Close()
	_, _ = io.Copy(c, c)
}

// roundTrip writes data through the pod listener, half-closes, and reads
// everything back until the far end closes.
func roundTrip(addr string, data []byte) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	// A session that loses a connection fails the test, never hangs it.
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		c.(*net.TCPConn).CloseWrite()
		errc <- err
	}()
	got, err := io.ReadAll(c)
	if werr := <-errc; werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("got %d bytes back, want %d identical", len(got), len(data))
	}
	return nil
}

func TestReverseHalfCloseAndConcurrency(t *testing.T) {
	noLeaks(t)
	local := serveLocal(t, echo)
	l, p := startReverse(t, local, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := make([]byte, 1+i*97_000) // up to ~1.8 MiB: many windows
			rand.Read(data)
			errs <- roundTrip(l.Addr().String(), data)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if res := p.stop(t); res.Conns != 20 || res.Err != nil {
		t.Errorf("node result %+v, want 20 connections and no error", res)
	}
}
