// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/kubestream/kubestream/internal/wiretest"
)

// udpEcho answers every datagram with itself, on the "pod's" loopback.
func udpEcho(t *testing.T) uint16 {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 70000)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteToUDP(buf[:n], from)
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

func udpPair(t *testing.T, cfg NodeConfig) (*pair, *net.UDPConn, *net.UDPConn) {
	t.Helper()
	remote := udpEcho(t)
	local, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	cfg.UDPPorts, cfg.UDP = []uint16{remote}, loopDialer{}
	ready := make(chan uint16, 1)
	p := startPair(t, cfg, ClientConfig{Pod: "demo", UDP: []UDPForward{{remote, local}}, Ready: ready}, UDPProtocol)
	waitReady(t, ready, 1)
	peer, err := net.DialUDP("udp", nil, local.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	_ = peer.SetReadBuffer(1 << 20)
	return p, local, peer
}

// exchange sends d and wants it back whole (wiretest.UDPRoundTrip).
func exchange(t *testing.T, peer *net.UDPConn, prev, d []byte) {
	t.Helper()
	if err := wiretest.UDPRoundTrip(peer, d, prev, 2*time.Second, make([]byte, MaxDatagram+1)); err != nil {
		t.Fatal(err)
	}
}

// Every datagram is carried as one: sizes 1..65507 (each up to 2 KiB,
// then a stride, and the largest), never merged or split.
func TestUDPDatagramBoundaries(t *testing.T) {
	noLeaks(t)
	p, _, peer := udpPair(t, NodeConfig{AssocIdleTimeout: time.Minute})
	sizes := []int{}
	for n := 1; n <= 2048; n++ {
		sizes = append(sizes, n)
	}
	for n := 2049; n < MaxDatagram; n += 997 {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, MaxDatagram-1, MaxDatagram)
	var prev []byte
	for _, n := range sizes {
		d := bytes.Repeat([]byte{byte(n)}, n)
		d[0], d[n-1] = 0xfe, byte(n>>8)
		exchange(t, peer, prev, d)
		prev = d
	}
	if res := p.stop(t); res.Conns != 1 || res.Err != nil {
		t.Errorf("node result %+v, want one association", res)
	}
}

// An idle association is closed by the node (and forgotten by the
// client); the peer's next datagram opens a new one.
func TestUDPAssociationTimeout(t *testing.T) {
	noLeaks(t)
	p, _, peer := udpPair(t, NodeConfig{AssocIdleTimeout: 300 * time.Millisecond})
	exchange(t, peer, nil, []byte("first"))
	// Long past the timeout, a slow sweep included. A first exchange slow
	// enough to be timed out and sent again opens one more: at least 2.
	time.Sleep(2 * time.Second)
	exchange(t, peer, []byte("first"), []byte("second"))
	if res := p.stop(t); res.Conns < 2 {
		t.Errorf("node result %+v, want 2 associations (the first timed out)", res)
	}
}

// MaxConns caps associations: a peer over it is refused, the others go on.
func TestUDPAssociationCap(t *testing.T) {
	noLeaks(t)
	p, local, peer := udpPair(t, NodeConfig{AssocIdleTimeout: time.Minute, MaxConns: 1})
	exchange(t, peer, nil, []byte("one"))
	other, err := net.DialUDP("udp", nil, local.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, _ = other.Write([]byte("two"))
	_ = other.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := other.Read(make([]byte, 10)); err == nil {
		t.Fatal("an association over the cap was answered")
	}
	exchange(t, peer, []byte("one"), []byte("still"))
	if res := p.stop(t); res.Refused == 0 || res.Conns != 1 {
		t.Errorf("node result %+v, want 1 association and refusals", res)
	}
}
