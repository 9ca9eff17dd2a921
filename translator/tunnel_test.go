// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"bytes"
	"encoding/binary"
	"testing"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
	"github.com/kubestream/kubestream/internal/wiretest"
)

// runTunnelUp passes data, cut into binary messages of step bytes, through
// tunnelUp, and returns the runtime's writes and the pf it told.
func runTunnelUp(t testing.TB, data []byte, step int) ([][]byte, *pfResets) {
	var msgs []byte
	for i := 0; i < len(data); i += step {
		msgs = append(msgs, wiretest.MaskedFrame(true, 2, data[i:min(i+step, len(data))])...)
	}
	cfg := DefaultConfig()
	wc := wire.NewConn(serverWS(t, &loopConn{Src: msgs}), &cfg.Limits)
	rt := &writesConn{}
	pf := newPFResets(klog.Background(), nil)
	if _, err := tunnelUp(wc, rt, make([]byte, spdy.HeaderLen+cfg.BufferSize), pf); err == nil {
		t.Fatal("tunnelUp ended without saying why")
	}
	return rt.writes, pf
}

// portForwardStream is a client's port-forward session as client-go
// writes it: a connection's error and data streams, then data frames, one
// larger than the tunnel's buffer, and a PING.
func portForwardStream() (stream []byte, frameEnds []int) {
	syn := func(id uint32, first bool, typ string) []byte {
		fixed := append(binary.BigEndian.AppendUint32(nil, id), 0, 0, 0, 0, 0, 0)
		return spdy.AppendHeaders(nil, spdy.TypeSynStream, fixed, first, "streamtype", typ, "port", "80", "requestid", "0")
	}
	data := func(n int) []byte {
		f := make([]byte, spdy.HeaderLen+n)
		spdy.PutDataHeader(f, 3, n, false)
		for i := range n {
			f[spdy.HeaderLen+i] = byte(i)
		}
		return f
	}
	ping := append(spdy.AppendControl(nil, spdy.TypePing, 0, 4), 0, 0, 0, 1)
	for _, f := range [][]byte{syn(1, true, "error"), syn(3, false, "data"), data(100), data(40000), ping, data(0)} {
		stream = append(stream, f...)
		frameEnds = append(frameEnds, len(stream))
	}
	return stream, frameEnds
}

// TestTunnelUp: the client's bytes reach the runtime unchanged however
// its messages cut them, each write ends at a frame's end unless the
// buffer was full, and pf hears of the streams the client opened.
func TestTunnelUp(t *testing.T) {
	stream, ends := portForwardStream()
	isEnd := map[int]bool{}
	for _, e := range ends {
		isEnd[e] = true
	}
	for _, step := range []int{1, 3, 8, 100, 4096, len(stream)} {
		writes, pf := runTunnelUp(t, stream, step)
		if got := bytes.Join(writes, nil); !bytes.Equal(got, stream) {
			t.Fatalf("step %d: the runtime got %d bytes, want %d", step, len(got), len(stream))
		}
		at := 0
		for _, w := range writes {
			at += len(w)
			if !isEnd[at] && len(w) != spdy.HeaderLen+DefaultConfig().BufferSize {
				t.Fatalf("step %d: a write of %d bytes ends inside a frame, at %d", step, len(w), at)
			}
		}
		if len(writes) > len(ends)+1 {
			t.Fatalf("step %d: %d writes for %d frames", step, len(writes), len(ends))
		}
		if hold, _ := pf.data(1, 10); !hold {
			t.Fatalf("step %d: pf did not pair the error stream the client opened", step)
		}
	}
}

// FuzzTunnelUp: the client's side of the tunnel against arbitrary bytes:
// the runtime gets the same bytes however the messages cut them, a prefix
// of what the client sent, and all of it when it ends between frames.
func FuzzTunnelUp(f *testing.F) {
	stream, _ := portForwardStream()
	f.Add(stream, uint8(7))
	for _, s := range spdySeeds(f) {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		if len(data) == 0 {
			return
		}
		whole, _ := runTunnelUp(t, data, len(data))
		parts, _ := runTunnelUp(t, data, int(chunk%64)+1)
		got := bytes.Join(whole, nil)
		if !bytes.Equal(got, bytes.Join(parts, nil)) {
			t.Fatalf("%x in one message, %x in parts", got, bytes.Join(parts, nil))
		}
		if !bytes.HasPrefix(data, got) {
			t.Fatalf("the runtime got %x, not a prefix of %x", got, data)
		}
		if frameAligned(data) && !bytes.Equal(got, data) {
			t.Fatalf("whole frames %x, the runtime got %x", data, got)
		}
	})
}

// frameAligned reports whether b is whole SPDY frames.
func frameAligned(b []byte) bool {
	for len(b) > 0 {
		if len(b) < spdy.HeaderLen || len(b) < spdy.HeaderLen+spdy.Length(b) {
			return false
		}
		b = b[spdy.HeaderLen+spdy.Length(b):]
	}
	return true
}
