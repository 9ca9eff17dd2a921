package translator

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/gorilla/websocket"
)

// scriptConn replays a client's bytes and records what the server writes.
type scriptConn struct {
	loopConn
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

// maskedFrame encodes one masked client frame with a non-zero mask key.
func maskedFrame(fin bool, op byte, payload []byte) []byte {
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

// serverFrames parses the server's (unmasked) frames: opcode and payload.
func serverFrames(t *testing.T, b []byte) (ops []int, payloads [][]byte) {
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

func newTestWSConn(t *testing.T, in []byte, maxMsg, maxRead int) (*wsConn, *scriptConn) {
	t.Helper()
	conn := &scriptConn{in: bytes.NewReader(in), maxRead: maxRead}
	cfg := DefaultConfig()
	cfg.MaxMessageSize = maxMsg
	ws := serverWS(t, conn)
	conn.out.Reset() // the 101
	return newWSConn(ws, &cfg), conn
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
			in:   cat(maskedFrame(false, 2, []byte("ab")), maskedFrame(true, 9, []byte("p")), maskedFrame(true, 0, []byte("cd"))),
			want: [][]byte{[]byte("abcd")}, wantErr: isEOFish, wantSent: []int{websocket.PongMessage}},
		{name: "64-bit length and many reads",
			in: cat(maskedFrame(true, 2, big), maskedFrame(true, 2, nil), maskedFrame(true, 2, []byte{7})), maxMsg: 1 << 20,
			want: [][]byte{big, {}, {7}}, wantErr: isEOFish},
		{name: "close from the client",
			in:   cat(maskedFrame(true, 2, []byte("x")), maskedFrame(true, 8, append([]byte{0x03, 0xe8}, "bye"...))),
			want: [][]byte{[]byte("x")},
			wantErr: func(err error) bool {
				var ce *websocket.CloseError
				return errors.As(err, &ce) && ce.Code == 1000 && ce.Text == "bye"
			},
			wantSent: []int{websocket.CloseMessage}},
		{name: "unmasked frame", in: []byte{0x82, 0x01, 'a'},
			wantErr: isProtocol, wantSent: []int{websocket.CloseMessage}},
		{name: "continuation without a message", in: maskedFrame(true, 0, []byte("a")),
			wantErr: isProtocol, wantSent: []int{websocket.CloseMessage}},
		{name: "new message inside a fragmented one", in: cat(maskedFrame(false, 2, []byte("a")), maskedFrame(true, 2, []byte("b"))),
			wantErr: isProtocol, wantSent: []int{websocket.CloseMessage}},
		{name: "reserved bits", in: append([]byte{0xc2}, maskedFrame(true, 2, []byte("a"))[1:]...),
			wantErr: isProtocol, wantSent: []int{websocket.CloseMessage}},
		{name: "fragmented control frame", in: maskedFrame(false, 9, []byte("a")),
			wantErr: isProtocol, wantSent: []int{websocket.CloseMessage}},
		{name: "message over the limit across fragments", maxMsg: 10,
			in:      cat(maskedFrame(false, 2, make([]byte, 6)), maskedFrame(true, 0, make([]byte, 6))),
			wantErr: func(err error) bool { return errors.Is(err, websocket.ErrReadLimit) }, wantSent: []int{websocket.CloseMessage}},
		{name: "truncated connection", in: maskedFrame(true, 2, big)[:5000], maxMsg: 1 << 20,
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
					if _, r, err = c.nextReader(); err != nil {
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
				ops, _ := serverFrames(t, conn.out.Bytes())
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
func isProtocol(err error) bool { return errors.Is(err, errProtocol) }

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
			if end := unmask(key, pos, got); end != p&3 || !bytes.Equal(got, want) {
				t.Fatalf("length %d offset %d: differs", n, pos)
			}
		}
	}
}
