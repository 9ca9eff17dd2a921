// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wiretest"
)

// runtimeLog is what a scripted SPDY runtime saw of a session.
type runtimeLog struct {
	data  map[uint32][]byte // data frame payloads by stream
	fin   map[uint32]bool   // streams the client half-closed
	types map[uint16]int    // frames by control type; data frames under 0
	err   error             // how the connection ended (io.EOF: closed by the peer)
}

// scriptedRuntime accepts every stream the translator opens (replying with
// a bare SYN_REPLY, which is all kubestream's client reads) and records what
// arrives until the translator closes the connection.
func scriptedRuntime(t *testing.T) (DialFunc, <-chan runtimeLog) {
	t.Helper()
	ours, theirs := tcpPair(t)
	done := serveScripted(theirs, nil)
	dial := func(context.Context, []string) (net.Conn, string, error) { return ours, RuntimeProtocol, nil }
	return dial, done
}

// serveScripted runs a scripted runtime on conn; onData, if set, is called
// after each data frame and ends the script (closing conn) when it returns
// true.
func serveScripted(conn net.Conn, onData func(conn net.Conn, id uint32) bool) <-chan runtimeLog {
	done := make(chan runtimeLog, 1)
	go func() {
		log := runtimeLog{data: map[uint32][]byte{}, fin: map[uint32]bool{}, types: map[uint16]int{}}
		defer func() { done <- log }()
		var h [spdy.HeaderLen]byte
		for {
			if _, err := io.ReadFull(conn, h[:]); err != nil {
				log.err = err
				return
			}
			payload := make([]byte, spdy.Length(h[:]))
			if _, err := io.ReadFull(conn, payload); err != nil {
				log.err = err
				return
			}
			if spdy.Control(h[:]) {
				log.types[spdy.ControlType(h[:])]++
				if spdy.ControlType(h[:]) == spdy.TypeSynStream {
					_, _ = conn.Write(append(spdy.AppendControl(nil, spdy.TypeSynReply, 0, 4), payload[:4]...))
				}
				continue
			}
			log.types[0]++
			id := binary.BigEndian.Uint32(h[:4])
			log.data[id] = append(log.data[id], payload...)
			if h[4]&spdy.FlagFin != 0 {
				log.fin[id] = true
			}
			if onData != nil && onData(conn, id) {
				conn.Close()
				return
			}
		}
	}()
	return done
}

// stdinStream is the stream ID of stdin in serveWith's sessions: error
// opens first (1), then stdin (3).
const stdinStream = 3

// TestClientEndsRuntimeLeg: however the client's side ends — a frame
// RFC 6455 forbids, or the connection cut inside a fragmented message — the
// translator closes the runtime leg and returns, and what an unfinished
// message held never reaches the runtime.
func TestClientEndsRuntimeLeg(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cat := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"unmasked frame", []byte{0x82, 0x02, 0x00, 0x78}},
		{"reserved bits", cat(wiretest.MaskedFrame(true, 0x40|2, []byte{0, 'x'}))},
		{"stray continuation", wiretest.MaskedFrame(true, 0, []byte{0, 'x'})},
		{"close signal cut between fragments", wiretest.MaskedFrame(false, 2, []byte{chanClose, ChanStdin})},
		{"close signal cut inside a fragment", wiretest.MaskedFrame(true, 2, []byte{chanClose, ChanStdin})[:7]},
		{"stdin cut between fragments", wiretest.MaskedFrame(false, 2, []byte{ChanStdin, 'c', 'u', 't'})},
		{"stdin cut inside a frame", wiretest.MaskedFrame(true, 2, []byte{ChanStdin, 'c', 'u', 't', 's'})[:9]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.CloseGrace = 500 * time.Millisecond
			dial, seen := scriptedRuntime(t)
			c, results := serveWith(t, cfg, dial)
			// After the readiness message the runtime leg is up.
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, _, err := c.ReadMessage(); err != nil {
				t.Fatalf("no readiness message: %v", err)
			}
			if _, err := c.NetConn().Write(tc.send); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			c.NetConn().Close()
			select {
			case log := <-seen:
				if log.err != io.EOF {
					t.Errorf("runtime leg ended with %v, want the translator's close", log.err)
				}
				if log.fin[stdinStream] || len(log.data[stdinStream]) > 0 {
					t.Errorf("an unfinished message was applied: stdin got %q, half-closed %v", log.data[stdinStream], log.fin[stdinStream])
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the runtime leg is still open 5 s after the client's side ended")
			}
			select {
			case res := <-results:
				if res.Err == nil {
					t.Error("the session's result carries no error")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("ServeRemoteCommand did not return")
			}
		})
	}
}
