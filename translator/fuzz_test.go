// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/gorilla/websocket"
	spdystream "github.com/moby/spdystream/spdy"

	"github.com/kubestream/kubestream/internal/wiretest"
)

// Fuzz targets for every parser of untrusted bytes in this package; `make
// fuzz` runs each. Seeds are real frames: what client-go, gorilla and
// spdystream put on the wire.

// clientSeeds are v5 client messages as client-go sends them, plus the
// framing errors the hardening tests pin.
func clientSeeds() [][]byte {
	cat := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	return [][]byte{
		wiretest.MaskedFrame(true, 2, []byte{ChanStdin, 'h', 'i'}),
		cat(wiretest.MaskedFrame(true, 2, []byte{ChanStdin, 'x'}), wiretest.MaskedFrame(true, 2, []byte{chanClose, ChanStdin})),
		wiretest.MaskedFrame(true, 2, []byte("\x04{\"Width\":80,\"Height\":24}")),
		cat(wiretest.MaskedFrame(false, 2, []byte("\x04{\"Width\":1")), wiretest.MaskedFrame(true, 0, []byte("23,\"Height\":45}"))),
		cat(wiretest.MaskedFrame(false, 2, []byte{ChanStdin}), wiretest.MaskedFrame(true, 9, []byte("p")), wiretest.MaskedFrame(true, 0, []byte("cd"))),
		wiretest.MaskedFrame(true, 8, websocket.FormatCloseMessage(1000, "")),
		wiretest.MaskedFrame(true, 2, make([]byte, 300)),
		{0x82, 0x02, 0x00, 0x78},
		{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0},
		wiretest.MaskedFrame(false, 2, []byte{chanClose}),
	}
}

// FuzzClientMessages: a v5 session's whole client read side (frames,
// fragments, control frames, channels, resize JSON, close signals) against
// arbitrary bytes ends with an error, never a panic or a hang.
func FuzzClientMessages(f *testing.F) {
	for _, s := range clientSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := benchSession(t, &loopConn{Src: data}, &loopConn{})
		s.resizeID = 7
		if err := s.readLoop(); err == nil {
			t.Fatal("the read loop ended without an error")
		}
	})
}

// spdySeeds are frames spdystream writes: SYN_REPLY, data with and without
// FIN, PING, RST_STREAM, GOAWAY, SETTINGS.
func spdySeeds(t testing.TB) [][]byte {
	var out [][]byte
	for _, fr := range []spdystream.Frame{
		&spdystream.SynReplyFrame{StreamId: 1, Headers: http.Header{"Streamtype": {"error"}}},
		&spdystream.DataFrame{StreamId: 5, Data: []byte("output")},
		&spdystream.DataFrame{StreamId: 1, Flags: spdystream.DataFlagFin, Data: []byte(`{"metadata":{},"status":"Success"}`)},
		&spdystream.PingFrame{Id: 2},
		&spdystream.RstStreamFrame{StreamId: 3, Status: spdystream.Cancel},
		&spdystream.GoAwayFrame{LastGoodStreamId: 5},
		&spdystream.SettingsFrame{FlagIdValues: []spdystream.SettingsFlagIdValue{{Id: spdystream.SettingsInitialWindowSize, Value: 1 << 16}}},
		&spdystream.SynStreamFrame{StreamId: 1, Headers: http.Header{"Streamtype": {"error"}}},
	} {
		var buf bytes.Buffer
		fw, err := spdystream.NewFramer(&buf, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if err := fw.WriteFrame(fr); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf.Bytes())
	}
	return append(out, bytes.Join(out, nil))
}

// FuzzRuntimeFrames: the runtime leg's SPDY reader against arbitrary bytes.
func FuzzRuntimeFrames(f *testing.F) {
	for _, s := range spdySeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := newSPDYConn(&loopConn{Src: data}, 0)
		buf := make([]byte, 4096)
		for {
			fr, err := c.next()
			if err != nil {
				return
			}
			if fr.control {
				continue
			}
			if fr.length <= len(buf) {
				err = c.readPayload(buf[:fr.length])
			} else {
				err = c.discard()
			}
			if err != nil {
				return
			}
		}
	})
}

// FuzzSPDYRelay: both copiers of the SPDY pass-through (client frames up,
// runtime frames down, header blocks decoded on the way) against arbitrary
// bytes.
func FuzzSPDYRelay(f *testing.F) {
	for _, s := range spdySeeds(f) {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, data []byte, up bool) {
		cfg := DefaultConfig()
		r := &spdyRelay{cfg: &cfg, jsonStatus: true, errStreams: map[uint32]bool{}}
		if up {
			r.client, r.rt = &loopConn{Src: data}, &loopConn{}
			r.cw.conn = r.client
			r.up()
			return
		}
		r.client, r.rt = &loopConn{}, &loopConn{Src: data}
		r.cw.conn = r.client
		err := r.down()
		r.cw.downEnded()
		r.tellLost(context.Background(), err)
	})
}

// FuzzFrameFollowers: the direct splice's WebSocket frame follower reaches
// the same state whatever the read sizes.
func FuzzFrameFollowers(f *testing.F) {
	for _, s := range clientSeeds() {
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		step := int(chunk%64) + 1
		// v5 on, so the error channel's status is kept the same way too.
		whole, parts := frameFollower{channels: true}, frameFollower{channels: true}
		whole.follow(data)
		for i := 0; i < len(data); i += step {
			parts.follow(data[i:min(i+step, len(data))])
		}
		if whole != parts {
			t.Fatalf("frame follower: %+v in one read, %+v in reads of %d", whole, parts, step)
		}
	})
}
