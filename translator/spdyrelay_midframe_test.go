// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kubestream/kubestream/internal/spdy"
)

// TestRelayPingMidFrame: a runtime that sends part of a data frame and
// stalls holds up none of the node's answers to the client's PINGs when
// the frame fits the buffer, and the frame still reaches the client whole
// once the runtime sends the rest. A frame larger than the buffer goes out
// in pieces; PINGs that come while it is half written are all answered at
// its end, never inside it.
func TestRelayPingMidFrame(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name        string
		bufferSize  int
		pings       int
		replyMidway bool // the reply comes before the frame's rest is sent
	}{
		{"fits the buffer", 32 << 10, 1, true},
		{"larger than the buffer", 256, 12, false}, // more than due holds: the rest wait
	} {
		t.Run(tc.name, func(t *testing.T) {
			clientApp, clientConn := tcpPair(t)
			rtConn, runtimeApp := tcpPair(t)
			cfg := DefaultConfig()
			cfg.BufferSize = tc.bufferSize
			done := make(chan RelayResult, 1)
			go func() { done <- RelaySPDY(context.Background(), clientConn, rtConn, RuntimeProtocol, cfg, nil) }()
			defer func() {
				clientApp.Close()
				runtimeApp.Close()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Error("RelaySPDY did not return")
				}
			}()

			out := make([]byte, spdy.HeaderLen+1000)
			spdy.PutDataHeader(out, 1, 1000, false)
			copy(out[spdy.HeaderLen:], bytes.Repeat([]byte("x"), 1000))
			if _, err := runtimeApp.Write(out[:600]); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(clientApp)
			if tc.replyMidway {
				time.Sleep(50 * time.Millisecond) // the frame's start is in (the node holds it: nothing to see)
			} else {
				// The frame's first piece has reached the client.
				_ = clientApp.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := br.Peek(spdy.HeaderLen); err != nil {
					t.Fatalf("the frame's first piece: %v", err)
				}
			}
			for id := range tc.pings {
				if _, err := clientApp.Write(pingFrame(uint32(2*id + 1))); err != nil {
					t.Fatal(err)
				}
			}
			fr := spdy.NewReader(br)
			if tc.replyMidway {
				_ = clientApp.SetReadDeadline(time.Now().Add(2 * time.Second))
				expectPing(t, fr, 1, "with the runtime stalled mid-frame")
			} else {
				time.Sleep(100 * time.Millisecond) // the PINGs wait for the frame's end
			}
			if _, err := runtimeApp.Write(out[600:]); err != nil {
				t.Fatal(err)
			}
			_ = clientApp.SetReadDeadline(time.Now().Add(5 * time.Second))
			h, err := fr.Next()
			if err != nil || h.Control() || h.Length() != 1000 {
				t.Fatalf("waiting for the data frame: header %x, %v", h, err)
			}
			got := make([]byte, 1000)
			if err := fr.ReadFull(got); err != nil || !bytes.Equal(got, out[spdy.HeaderLen:]) {
				t.Fatalf("data frame's payload %q..., %v: want it intact", got[:min(len(got), 16)], err)
			}
			if !tc.replyMidway {
				for id := range tc.pings {
					expectPing(t, fr, uint32(2*id+1), "after the frame")
				}
			}
		})
	}
}

// pingFrame is a SPDY PING with id.
func pingFrame(id uint32) []byte {
	return binary.BigEndian.AppendUint32(spdy.AppendControl(nil, spdy.TypePing, 0, 4), id)
}

// expectPing reads the next frame from fr: the reply to PING id.
func expectPing(t *testing.T, fr *spdy.Reader, id uint32, when string) {
	t.Helper()
	h, err := fr.Next()
	if err != nil {
		t.Fatalf("waiting for the reply to PING %d %s: %v", id, when, err)
	}
	var p [4]byte
	if !h.Control() || h.Type() != spdy.TypePing || h.Length() != 4 || fr.ReadFull(p[:]) != nil || binary.BigEndian.Uint32(p[:]) != id {
		t.Fatalf("%s: frame %x, want the reply to PING %d", when, h, id)
	}
}
