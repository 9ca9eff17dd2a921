// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gorilla/websocket"
)

// TestV5Reader: what a client sends, read as the sessions of both ends
// read it (a real connection, gorilla's client writing).
func TestV5Reader(t *testing.T) {
	cases := []struct {
		name      string
		stdin     bool
		tty       bool
		msgs      [][]byte
		text      bool // the last message is a text message
		want      string
		wantError string
	}{
		{"stdin, its close, a repeated close", true, false,
			[][]byte{{}, {0, 'a', 'b'}, {255, 0}, {255, 0}, {0}}, false, "stdin ab|close stdin|", "data on stdin, which is not open"},
		{"stdin not open", false, false, [][]byte{{0, 'x'}}, false, "", "data on stdin, which is not open"},
		{"resize split across messages, then closed", true, true,
			[][]byte{{4, '{', '"', 'W', 'i', 'd', 't', 'h', '"', ':', '1', ','}, append([]byte{4}, `"Height":2}`...), {255, 4}, {255, 4}, {4, '{', '}'}},
			false, "sizes [] (11 bytes)|sizes [1x2] (11 bytes)|close resize|", "resize after the resize channel was closed"},
		{"resize without a tty", true, false, [][]byte{append([]byte{4}, `{"Width":1,"Height":1}`...)}, false, "", "resize without a tty"},
		{"bad resize", true, true, [][]byte{append([]byte{4}, "not json"...)}, false, "", "invalid resize"},
		{"resize too large", true, true, [][]byte{append([]byte{4}, make([]byte, 5000)...)}, false, "", "resize message larger than"},
		{"close signal too long", true, false, [][]byte{{255, 0, 0}}, false, "", "exactly [255, channel]"},
		{"close of stdout", true, false, [][]byte{{255, 1}}, false, "", "which a client cannot close"},
		{"unknown channel", true, false, [][]byte{{9, 'x'}}, false, "", "unknown client channel 9"},
		{"text message", true, false, [][]byte{[]byte("\x00hi")}, true, "", "binary messages only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
				if err != nil {
					got <- err.Error()
					return
				}
				c := NewConn(ws, &DefaultLimits)
				defer c.Shutdown()
				in := NewV5Reader(c, tc.stdin, tc.tty)
				var b strings.Builder
				for {
					m, err := in.Next()
					var pe *ProtocolError
					if errors.As(err, &pe) {
						got <- b.String() + "error: " + pe.Error()
						return
					}
					if err != nil {
						got <- b.String() + "end: " + err.Error()
						return
					}
					switch {
					case m.Stdin != nil:
						data, _ := io.ReadAll(m.Stdin)
						fmt.Fprintf(&b, "stdin %s|", data)
					case m.CloseStdin:
						b.WriteString("close stdin|")
					case m.CloseResize:
						b.WriteString("close resize|")
					default:
						fmt.Fprintf(&b, "sizes %v (%d bytes)|", m.Sizes, m.ResizeBytes)
					}
				}
			}))
			defer srv.Close()
			c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for i, m := range tc.msgs {
				mt := websocket.BinaryMessage
				if tc.text && i == len(tc.msgs)-1 {
					mt = websocket.TextMessage
				}
				if err := c.WriteMessage(mt, m); err != nil {
					t.Fatal(err)
				}
			}
			out := <-got
			if !strings.HasPrefix(out, tc.want+"error: ") || !strings.Contains(out, tc.wantError) {
				t.Fatalf("read %q; want %q then an error saying %q", out, tc.want, tc.wantError)
			}
		})
	}
}

// TestReadStdin: a stdin message comes out in whole pieces (as much as the
// buffer holds, however the reads fragment it), its end is told apart from
// a full buffer, and a message cut off yields no data at all.
func TestReadStdin(t *testing.T) {
	frag := func(parts ...string) io.Reader {
		rs := make([]io.Reader, len(parts))
		for i, p := range parts {
			rs[i] = strings.NewReader(p)
		}
		return io.MultiReader(rs...) // one part per Read, as frames come
	}
	buf := make([]byte, 6)
	r := frag("ab", "cd", "ef", "gh")
	if n, end, err := ReadStdin(r, buf); n != 6 || end || err != nil || string(buf[:n]) != "abcdef" {
		t.Fatalf("first piece: %d %q end %v err %v", n, buf[:n], end, err)
	}
	if n, end, err := ReadStdin(r, buf); n != 2 || !end || err != nil || string(buf[:n]) != "gh" {
		t.Fatalf("the rest: %d %q end %v err %v", n, buf[:n], end, err)
	}
	cut := io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(io.ErrUnexpectedEOF))
	if n, _, err := ReadStdin(cut, buf); n != 0 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut off: %d bytes as data, err %v; want none and the error", n, err)
	}
}
