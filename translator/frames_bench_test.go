// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
	"github.com/kubestream/kubestream/internal/wiretest"
)

// Frame-path benchmarks: one 32 KiB payload per op through the code that
// runs for every frame of a session, over in-memory connections that cost
// nothing, so allocs/op and ns/op are the translator's own. `make bench`
// runs them with -benchmem.

const benchPayload = 32 * 1024

type loopConn = wiretest.LoopConn

// serverWS upgrades a fake request over conn, as the server does.
func serverWS(b testing.TB, conn net.Conn) *websocket.Conn {
	return wiretest.ServerWS(b, conn, benchPayload+16)
}

// clientFrame encodes a masked binary client message (mask key 0).
func clientFrame(payload []byte) []byte {
	n := len(payload)
	f := []byte{0x82, 0x80 | 126, byte(n >> 8), byte(n), 0, 0, 0, 0}
	if n < 126 {
		f = []byte{0x82, 0x80 | byte(n), 0, 0, 0, 0}
	}
	return append(f, payload...)
}

func benchSession(b testing.TB, wsc net.Conn, rtConn net.Conn) *rcSession {
	cfg := DefaultConfig()
	cfg.BufferSize = benchPayload
	s := &rcSession{cfg: &cfg, wc: wire.NewConn(serverWS(b, wsc), &cfg.Limits), rt: newSPDYConn(rtConn, 0),
		stdinID: 3, stdoutID: 5, writing: true, open: map[uint32]bool{5: true}}
	return s
}

// BenchmarkFrameIn: a v5 stdin message from the client becomes a SPDY data
// frame to the runtime.
func BenchmarkFrameIn(b *testing.B) {
	payload := append([]byte{ChanStdin}, make([]byte, benchPayload)...)
	s := benchSession(b, &loopConn{Src: clientFrame(payload), Left: -1}, &loopConn{})
	b.SetBytes(benchPayload)
	b.ReportAllocs()
	b.ResetTimer()
	in := wire.NewV5Reader(s.wc, true, false)
	for i := 0; i < b.N; i++ {
		m, err := in.Next()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.carry(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrameOut: a SPDY data frame on the runtime's stdout becomes a v5
// message to the client.
func BenchmarkFrameOut(b *testing.B) {
	frame := make([]byte, spdy.HeaderLen+benchPayload)
	binary.BigEndian.PutUint32(frame, 5)
	putLen24(frame[5:8], benchPayload)
	s := benchSession(b, &loopConn{}, &loopConn{Src: frame, Left: -1})
	b.SetBytes(benchPayload)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := s.rt.next()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.forward(f); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTunnelDown: runtime bytes become tunnel messages.
func BenchmarkTunnelDown(b *testing.B) {
	cfg := DefaultConfig()
	wc := wire.NewConn(serverWS(b, &loopConn{}), &cfg.Limits)
	frame := make([]byte, spdy.HeaderLen+benchPayload) // a SPDY data frame, as the runtime sends
	binary.BigEndian.PutUint32(frame, 2)
	putLen24(frame[5:8], benchPayload)
	rt := &loopConn{Src: frame, Left: b.N}
	buf := make([]byte, wire.Headroom+spdy.HeaderLen+benchPayload)
	b.SetBytes(benchPayload)
	b.ReportAllocs()
	b.ResetTimer()
	if _, err := tunnelDown(wc, rt, buf, newPFResets(klog.Background(), nil)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTunnelUp: client-go's tunnel messages (SPDY frame header words,
// then the payload, as separate messages) become coalesced runtime writes.
// The whole ServeTunnel runs; its set-up is amortised over b.N frames.
func BenchmarkTunnelUp(b *testing.B) {
	hdr := make([]byte, spdy.HeaderLen)
	binary.BigEndian.PutUint32(hdr, 1)
	putLen24(hdr[5:8], benchPayload)
	var src []byte
	src = append(src, clientFrame(hdr[:4])...)
	src = append(src, clientFrame(hdr[4:])...)
	src = append(src, clientFrame(make([]byte, benchPayload))...)
	cfg := DefaultConfig()
	cfg.CloseGrace = time.Millisecond
	ws := serverWS(b, &loopConn{Src: src, Left: b.N - 1})
	rt := &blockingConn{closed: make(chan struct{})}
	b.SetBytes(benchPayload)
	b.ReportAllocs()
	b.ResetTimer()
	res := ServeTunnel(b.Context(), ws, rt, cfg)
	if res.BytesUp != uint64(b.N)*(benchPayload+spdy.HeaderLen) {
		b.Fatalf("carried %d bytes for %d frames", res.BytesUp, b.N)
	}
}

func putLen24(b []byte, n int) { b[0], b[1], b[2] = byte(n>>16), byte(n>>8), byte(n) }

// blockingConn is a runtime connection that never sends and drops writes.
type blockingConn struct {
	loopConn
	closed chan struct{}
}

func (c *blockingConn) Read([]byte) (int, error) { <-c.closed; return 0, io.EOF }
func (c *blockingConn) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return nil
}
