// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package wiretest holds the in-memory connections the wire-level tests,
// benchmarks and fuzz targets of internal/wire, translator and cri/streaming
// share: a connection that replays bytes and one the server side of a
// WebSocket upgrade runs over; and the pieces the port-forward tests of
// portmux and e2e share: a server that resets on cue, and a UDP round trip.
//
// Reading order: wiretest.go (the in-memory connections), reset.go (the
// resetting server), udp.go (the UDP round trip); the three share nothing.
package wiretest

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// LoopConn is a net.Conn whose reads replay Src forever (Left < 0) or Left
// more times, and whose writes vanish: what is measured over it is the
// caller's own cost.
type LoopConn struct {
	Src  []byte
	off  int
	Left int
}

func (c *LoopConn) Read(p []byte) (int, error) {
	if c.off == len(c.Src) {
		if c.Left == 0 {
			return 0, io.EOF
		}
		c.Left--
		c.off = 0
	}
	n := copy(p, c.Src[c.off:])
	c.off += n
	return n, nil
}
func (c *LoopConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *LoopConn) Close() error                     { return nil }
func (c *LoopConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *LoopConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *LoopConn) SetDeadline(time.Time) error      { return nil }
func (c *LoopConn) SetReadDeadline(time.Time) error  { return nil }
func (c *LoopConn) SetWriteDeadline(time.Time) error { return nil }

// hijacker hands gorilla's Upgrader conn as the client connection.
type hijacker struct {
	httptest.ResponseRecorder
	conn net.Conn
}

func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return h.conn, bufio.NewReadWriter(bufio.NewReaderSize(h.conn, 4096), bufio.NewWriter(h.conn)), nil
}

// ServerWS upgrades a fake v5 request over conn, as a server does, with a
// write buffer of writeBuf bytes (0: gorilla's default).
func ServerWS(tb testing.TB, conn net.Conn, writeBuf int) *websocket.Conn {
	tb.Helper()
	req := httptest.NewRequest(http.MethodGet, "/exec", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
	up := websocket.Upgrader{Subprotocols: []string{"v5.channel.k8s.io"}, WriteBufferSize: writeBuf}
	ws, err := up.Upgrade(&hijacker{conn: conn}, req, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return ws
}

// MaskedFrame encodes one masked client frame with a non-zero mask key.
func MaskedFrame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var h []byte
	switch n := len(payload); {
	case n < 126:
		h = []byte{b0, 0x80 | byte(n)}
	case n < 1<<16:
		h = []byte{b0, 0x80 | 126, byte(n >> 8), byte(n)}
	default:
		h = []byte{b0, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(h[2:], uint64(n))
	}
	key := []byte{0x12, 0x34, 0x56, 0x78}
	out := append(h, key...)
	for i, c := range payload {
		out = append(out, c^key[i&3])
	}
	return out
}

// ServerFrames parses the server's (unmasked) frames: opcode and payload.
func ServerFrames(t *testing.T, b []byte) (ops []int, payloads [][]byte) {
	t.Helper()
	for len(b) > 0 {
		op, n, h := int(b[0]&0x0f), int(b[1]&0x7f), 2
		switch n {
		case 126:
			n, h = int(binary.BigEndian.Uint16(b[2:])), 4
		case 127:
			n, h = int(binary.BigEndian.Uint64(b[2:])), 10
		}
		ops, payloads = append(ops, op), append(payloads, b[h:h+n])
		b = b[h+n:]
	}
	return ops, payloads
}
