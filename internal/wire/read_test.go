// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"testing"

	"time"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/internal/wiretest"
)

// scriptConn replays a client's bytes and records what the server writes.
type scriptConn struct {
	wiretest.LoopConn
	in      *bytes.Reader
	out     bytes.Buffer
	maxRead int // 0: as much as asked
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if c.maxRead > 0 && len(p) > c.maxRead {
		p = p[:c.maxRead]
	}
	return c.in.Read(p)
}
func (c *scriptConn) Write(p []byte) (int, error) { return c.out.Write(p) }

func newTestWSConn(t *testing.T, in []byte, maxMsg, maxRead int) (*Conn, *scriptConn) {
	t.Helper()
	conn := &scriptConn{in: bytes.NewReader(in), maxRead: maxRead}
	cfg := Limits{PingPeriod: 30 * time.Second, PongTimeout: time.Minute, WriteTimeout: 10 * time.Second,
		CloseGrace: 5 * time.Second, MaxMessageSize: maxMsg}
	ws := wiretest.ServerWS(t, conn, 0)
	conn.out.Reset() // the 101
	return NewConn(ws, &cfg), conn
}

// TestReader: the hand-written client reader against RFC 6455's cases.
func TestReader(t *testing.T) {
	big := make([]byte, 70000)
	_, _ = rand.Read(big)
	cat := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	for _, tc := range []struct {
		name     string
		in       []byte
		maxMsg   int
		want     [][]byte // messages read, in order
		wantErr  func(error) bool
		wantSent []int // opcodes the server wrote in reply
	}{
		{name: "fragmented with a ping inside",
			in:   cat(wiretest.MaskedFrame(false, 2, []byte("ab")), wiretest.MaskedFrame(true, 9, []byte("p")), wiretest.MaskedFrame(true, 0, []byte("cd"))),
			want: [][]byte{[]byte("abcd")}, wantErr: isEOFish, wantSent: []int{websocket.PongMessage}},
		{name: "64-bit length and many reads",
			in: cat(wiretest.MaskedFrame(true, 2, big), wiretest.MaskedFrame(true, 2, nil), wiretest.MaskedFrame(true, 2, []byte{7})), maxMsg: 1 << 20,
			want: [][]byte{big, {}, {7}}, wantErr: isEOFish},
		{name: "close from the client",
			in:   cat(wiretest.MaskedFrame(true, 2, []byte("x")), wiretest.MaskedFrame(true, 8, append([]byte{0x03, 0xe8}, "bye"...))),
			want: [][]byte{[]byte("x")},
			wantErr: func(err error) bool {
				var ce *websocket.CloseError
				return errors.As(err, &ce) && ce.Code == 1000 && ce.Text == "bye"
			},
			wantSent: []int{websocket.CloseMessage}},
		{name: "unmasked frame", in: []byte{0x82, 0x01, 'a'},
			wantErr: isProtocol, wantSent: []int{websocket.CloseMessage}},
		{name: "continuation without a message", in: wiretest.MaskedFrame(true, 0, []byte("a")),
			wantErr: isProtocol, wantSent: []int{websocket.CloseMessage}},
		{name: "new message inside a fragmented one", in: cat(wiretest.MaskedFrame(false, 2, []byte("a")), wiretest.MaskedFrame(true, 2, []byte("b"))),
			wantErr: isProtocol, wantSent: []int{websocket.CloseMessage}},
		{name: "reserved bits", in: append([]byte{0xc2}, wiretest.MaskedFrame(true, 2, []byte("a"))[1:]...),
			wantErr: isProtocol, wantSent: []int{websocket.CloseMessage}},
		{name: "fragmented control frame", in: wiretest.MaskedFrame(false, 9, []byte("a")),
			wantErr: isProtocol, wantSent: []int{websocket.CloseMessage}},
		{name: "message over the limit across fragments", maxMsg: 10,
			in:      cat(wiretest.MaskedFrame(false, 2, make([]byte, 6)), wiretest.MaskedFrame(true, 0, make([]byte, 6))),
			wantErr: func(err error) bool { return errors.Is(err, websocket.ErrReadLimit) }, wantSent: []int{websocket.CloseMessage}},
		{name: "truncated connection", in: wiretest.MaskedFrame(true, 2, big)[:5000], maxMsg: 1 << 20,
			wantErr: func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{name: "connection cut inside a header", in: cat(wiretest.MaskedFrame(true, 2, []byte("x")), wiretest.MaskedFrame(true, 2, []byte("y"))[:3]),
			want:    [][]byte{[]byte("x")},
			wantErr: func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
	} {
		// Small connection reads make frames straddle the staging buffer's
		// refills; whole ones let large reads run on into the next frames.
		for _, maxRead := range []int{1000, 0} {
			t.Run(fmt.Sprintf("%s/reads=%d", tc.name, maxRead), func(t *testing.T) {
				if tc.maxMsg == 0 {
					tc.maxMsg = 1024
				}
				c, conn := newTestWSConn(t, tc.in, tc.maxMsg, maxRead)
				var got [][]byte
				var err error
				for {
					var r io.Reader
					if _, r, err = c.NextReader(); err != nil {
						break
					}
					// Odd-sized reads put unmasking at every key offset.
					var msg []byte
					buf := make([]byte, 4099)
					for size := 1; ; size = size%4099 + 7 {
						n, rerr := r.Read(buf[:size])
						msg = append(msg, buf[:n]...)
						if rerr == io.EOF {
							break
						}
						if rerr != nil {
							err = rerr
							break
						}
					}
					if err != nil {
						break
					}
					got = append(got, msg)
				}
				if !tc.wantErr(err) {
					t.Fatalf("ended with %v", err)
				}
				if len(got) != len(tc.want) {
					t.Fatalf("read %d messages, want %d", len(got), len(tc.want))
				}
				for i := range got {
					if !bytes.Equal(got[i], tc.want[i]) {
						t.Fatalf("message %d differs (%d bytes, want %d)", i, len(got[i]), len(tc.want[i]))
					}
				}
				ops, _ := wiretest.ServerFrames(t, conn.out.Bytes())
				if len(ops) != len(tc.wantSent) {
					t.Fatalf("server wrote opcodes %v, want %v", ops, tc.wantSent)
				}
				for i := range ops {
					if ops[i] != tc.wantSent[i] {
						t.Fatalf("server wrote opcodes %v, want %v", ops, tc.wantSent)
					}
				}
			})
		}
	}
}

func isEOFish(err error) bool   { return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) }
func isProtocol(err error) bool { return errors.Is(err, ErrProtocol) }

// TestUnmask: the unrolled loop agrees with the byte loop at every length
// and key offset.
func TestUnmask(t *testing.T) {
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	for n := 0; n < 300; n++ {
		for pos := 0; pos < 4; pos++ {
			got := make([]byte, n)
			_, _ = rand.Read(got)
			want := append([]byte(nil), got...)
			p := pos
			for i := range want {
				want[i] ^= key[p&3]
				p++
			}
			if end := Unmask(key, pos, got); end != p&3 || !bytes.Equal(got, want) {
				t.Fatalf("length %d offset %d: differs", n, pos)
			}
		}
	}
}
