// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestRawReader: a plain TCP connection's raw reads end as net.Conn's do:
// the bytes, then io.EOF at the peer's close; a timeout past the read
// deadline; net.ErrClosed once closed.
func TestRawReader(t *testing.T) {
	c, peer := tcpPair(t)
	r := newSource(c)
	if _, ok := r.(*rawReader); !ok {
		t.Fatalf("plain TCP read through %T", r)
	}
	go func() {
		_, _ = peer.Write([]byte("hello"))
		time.Sleep(20 * time.Millisecond) // the reader waits on the poller
		_, _ = peer.Write([]byte(" world"))
		peer.Close()
	}()
	got, err := io.ReadAll(r)
	if err != nil || string(got) != "hello world" {
		t.Fatalf("read %q, %v", got, err)
	}

	c, _ = tcpPair(t)
	r = newSource(c)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := r.Read(make([]byte, 8)); n != 0 || !IsTimeout(err) {
		t.Fatalf("past the deadline: %d bytes, %v; want a timeout", n, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	go func() {
		time.Sleep(20 * time.Millisecond)
		c.Close()
	}()
	if n, err := r.Read(make([]byte, 8)); n != 0 || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("closed while reading: %d bytes, %v; want net.ErrClosed", n, err)
	}
}
