// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"testing"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
	"github.com/kubestream/kubestream/internal/wiretest"
)

// writesConn keeps each Write whole: gorilla writes a message with one.
type writesConn struct {
	wiretest.LoopConn
	writes [][]byte
}

func (c *writesConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, slices.Clone(p))
	return len(p), nil
}

// perFrameConn hands out src one SPDY frame per Read at most, as a runtime
// whose frames arrive one by one would.
type perFrameConn struct {
	wiretest.LoopConn
	ends []int // offsets where frames end
	off  int
}

func (c *perFrameConn) Read(p []byte) (int, error) {
	if c.off == len(c.Src) {
		return 0, io.EOF
	}
	end := c.ends[0]
	for end <= c.off {
		c.ends = c.ends[1:]
		end = c.ends[0]
	}
	n := copy(p, c.Src[c.off:end])
	c.off += n
	return n, nil
}

// TestOutputJoinsArrivedFrames: stdout frames that have arrived together
// go to the client as one message (up to BufferSize); a frame of another
// stream ends the message, so the client's order is the runtime's; frames
// that arrive one by one are sent one by one, none held for the next.
func TestOutputJoinsArrivedFrames(t *testing.T) {
	type fr struct {
		id   uint32
		size int
	}
	frames := []fr{{5, 8 << 10}, {5, 8 << 10}, {5, 8 << 10}, {5, 8 << 10}, {7, 100}, {5, 20 << 10}, {5, 20 << 10}, {5, 20 << 10}, {5, 3}}
	var src []byte
	var ends []int
	want := map[byte][]byte{}
	for i, f := range frames {
		h := make([]byte, spdy.HeaderLen)
		binary.BigEndian.PutUint32(h, f.id)
		putLen24(h[5:8], f.size)
		payload := bytes.Repeat([]byte{byte('a' + i)}, f.size)
		src = append(append(src, h...), payload...)
		ends = append(ends, len(src))
		ch := byte(ChanStdout)
		if f.id == 7 {
			ch = ChanStderr
		}
		want[ch] = append(want[ch], payload...)
	}
	for _, tc := range []struct {
		name  string
		rt    net.Conn
		sizes []int
	}{
		{"arrived together", &wiretest.LoopConn{Src: src}, []int{32 << 10, 100, 20 << 10, 20 << 10, 20<<10 + 3}},
		{"one by one", &perFrameConn{LoopConn: wiretest.LoopConn{Src: src}, ends: ends}, []int{8 << 10, 8 << 10, 8 << 10, 8 << 10, 100, 20 << 10, 20 << 10, 20 << 10, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := &writesConn{}
			cfg := DefaultConfig()
			rt := newSPDYConn(tc.rt, 0)
			s := &rcSession{cfg: &cfg, wc: wire.NewConn(wiretest.ServerWS(t, client, cfg.BufferSize+16), &cfg.Limits), rt: rt,
				stdoutID: 5, stderrID: 7, writing: true, open: map[uint32]bool{5: true, 7: true}}
			client.writes = nil // the handshake
			for {
				f, err := s.rt.next()
				if err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				if err := s.forward(f); err != nil {
					t.Fatal(err)
				}
			}
			var sizes []int
			got := map[byte][]byte{}
			for _, w := range client.writes {
				// Server frames are unmasked: the payload follows a 2-,
				// 4- or 10-byte header.
				payload := w[wire.HeaderLen(w[1]):]
				sizes = append(sizes, len(payload)-1)
				got[payload[0]] = append(got[payload[0]], payload[1:]...)
			}
			if !slices.Equal(sizes, tc.sizes) {
				t.Errorf("message sizes %v, want %v", sizes, tc.sizes)
			}
			for ch, b := range want {
				if !bytes.Equal(got[ch], b) {
					t.Errorf("channel %d: %d bytes that differ from the %d sent", ch, len(got[ch]), len(b))
				}
			}
		})
	}
}
