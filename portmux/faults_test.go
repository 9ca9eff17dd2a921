// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A local service that resets one connection: that connection ends alone
// (the pod side sees it end), the others and the listener go on.
func TestResetOneConnectionLeavesOthers(t *testing.T) {
	noLeaks(t)
	local := serveLocal(t, func(i int, c net.Conn) {
		if i == 0 {
			buf := make([]byte, 1)
			_, _ = c.Read(buf)
			closeConn(c, true) // RST
			return
		}
		echo(i, c)
	})
	l, p := startReverse(t, local, 0)

	victim := dialVictim(t, l.Addr().String())
	defer victim.Close()
	_ = victim.SetReadDeadline(time.Now().Add(5 * time.Second))
	// The local reset comes through as a reset (or an end): not a timeout.
	_, err := io.ReadAll(victim)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the reset connection did not end")
	}
	for range 3 {
		if err := roundTrip(l.Addr().String(), bytes.Repeat([]byte("after"), 1000)); err != nil {
			t.Fatalf("after one reset: %v", err)
		}
	}
	if res := p.stop(t); res.Err != nil || res.Conns != 4 {
		t.Errorf("node result %+v", res)
	}
}

// A local service that never reads: the client end buffers at most one
// window for that connection, and another connection is unaffected.
func TestWindowBoundsASlowLocalService(t *testing.T) {
	noLeaks(t)
	stuck := make(chan struct{})
	// The client dials each connection in its own goroutine, so the local
	// service may accept them in either order: the slow one is told by its
	// first byte ('s'), not by when it arrives.
	local := serveLocal(t, func(i int, c net.Conn) {
		defer c.Close()
		first := make([]byte, 1)
		if _, err := io.ReadFull(c, first); err != nil {
			return
		}
		if first[0] == 's' {
			<-stuck // reads nothing more until the end
			return
		}
		if _, err := c.Write(first); err == nil {
			_, _ = io.Copy(c, c)
		}
	})
	l, p := startReverse(t, local, 0)
	slow, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	written := make(chan int, 1)
	go func() {
		n := 0
		chunk := bytes.Repeat([]byte("s"), 64<<10)
		_ = slow.SetWriteDeadline(time.Now().Add(2 * time.Second))
		for {
			m, err := slow.Write(chunk)
			n += m
			if err != nil {
				written <- n
				return
			}
		}
	}()
	if err := roundTrip(l.Addr().String(), bytes.Repeat([]byte("z"), 1<<20)); err != nil {
		t.Fatalf("a second connection beside a stuck one: %v", err)
	}
	n := <-written
	// Kernel buffers on both hops take a few MiB; the session's own share
	// is one window, so the pod's writer is stopped well short of 64 MiB.
	if n >= 64<<20 {
		t.Fatalf("pod wrote %d bytes into a service that reads nothing", n)
	}
	close(stuck)
	if res := p.stop(t); res.Err != nil {
		t.Errorf("node: %v", res.Err)
	}
}

// The window is enforced on the receiving side: data past it ends the
// session as a protocol error.
func TestDataPastWindowIsRefused(t *testing.T) {
	m := &mux{node: true}
	s := m.newStream(1, nil)
	if err := s.deliver(make([]byte, Window)); err != nil {
		t.Fatal(err)
	}
	if err := s.deliver([]byte{1}); !errors.Is(err, ErrFrame) {
		t.Fatalf("data past the window: %v, want ErrFrame", err)
	}
}

// MaxConns: the connection over the cap is reset at once; those under it work.
func TestConnectionCap(t *testing.T) {
	noLeaks(t)
	hold := make(chan struct{})
	var release sync.Once
	// Deferred calls run before cleanups: a test that fails before the
	// release must not leave serveLocal's handlers waiting for it.
	defer release.Do(func() { close(hold) })
	local := serveLocal(t, func(i int, c net.Conn) { <-hold; echo(i, c) })
	l, p := startReverse(t, local, 2)
	var kept []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		kept = append(kept, c)
	}
	time.Sleep(200 * time.Millisecond) // both accepted and counted
	// The node ends the connection over the cap at once: its reset may
	// even beat the dial's return on loopback.
	if over, err := net.Dial("tcp", l.Addr().String()); err == nil {
		_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = over.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); err == nil || (ok && ne.Timeout()) {
			t.Fatalf("the connection over the cap was not ended: %v", err)
		}
		over.Close()
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	release.Do(func() { close(hold) })
	for _, c := range kept {
		if _, err := c.Write([]byte("ok")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ok" {
			t.Fatalf("a connection under the cap: %q %v", buf, err)
		}
	}
	if res := p.stop(t); res.Refused != 1 || res.Conns != 2 {
		t.Errorf("node result %+v, want 2 connections and 1 refused", res)
	}
}

// The node's reason for ending (here a deleted pod) reaches the client.
func TestNodeEndReachesClient(t *testing.T) {
	noLeaks(t)
	l, p := startReverse(t, "127.0.0.1:1", 0)
	p.nodeCx(errors.New("pod default/demo was deleted"))
	var se *SessionError
	select {
	case err := <-p.client:
		if !errors.As(err, &se) || se.Message != "pod default/demo was deleted" {
			t.Fatalf("client ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("client did not end")
	}
	<-p.node
	p.srv.Close()
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Fatal("the listener outlived the session")
	}
}

// A pod process resets its connection: that connection's local end is
// ended, and the listener and the session serve the next ones.
func TestPodResetOneConnectionLeavesOthers(t *testing.T) {
	noLeaks(t)
	localEnded := make(chan error, 1)
	local := serveLocal(t, func(i int, c net.Conn) {
		if i == 0 {
			defer c.Close()
			_, err := io.Copy(c, c) // echoes until the pod's reset reaches it
			localEnded <- err
			return
		}
		echo(i, c)
	})
	l, p := startReverse(t, local, 0)

	victim := dialVictim(t, l.Addr().String())
	if _, err := io.ReadFull(victim, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	closeConn(victim, true) // RST from the pod's side
	select {
	case <-localEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("the local end of the connection the pod reset was not ended")
	}
	for range 3 {
		if err := roundTrip(l.Addr().String(), bytes.Repeat([]byte("after"), 1000)); err != nil {
			t.Fatalf("after the pod's reset: %v", err)
		}
	}
	if res := p.stop(t); res.Err != nil || res.Conns != 4 {
		t.Errorf("node result %+v", res)
	}
}

// dialVictim opens the connection a fault test breaks, one byte sent on
// it so that the pod side has taken it.
func dialVictim(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	return c
}
