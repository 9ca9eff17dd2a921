// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kubestream/kubestream/internal/spdy"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/streaming/pkg/httpstream"
	k8sspdy "k8s.io/streaming/pkg/httpstream/spdy"
)

// relayPair runs RelaySPDY between a spdystream client connection and a
// spdystream server connection (what client-go and runtimes use) and
// returns both ends, the runtime's raw socket and the relay's result.
func relayPair(t *testing.T, protocol string, cfg Config) (httpstream.Connection, <-chan httpstream.Stream, net.Conn, <-chan RelayResult) {
	t.Helper()
	clientSide, relayClient := tcpPair(t)
	relayRT, rtSide := tcpPair(t)
	results := make(chan RelayResult, 1)
	go func() { results <- RelaySPDY(context.Background(), relayClient, relayRT, protocol, cfg, nil) }()
	streams := make(chan httpstream.Stream, 8)
	srv, err := k8sspdy.NewServerConnection(rtSide, func(s httpstream.Stream, _ <-chan struct{}) error {
		streams <- s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cl, err := k8sspdy.NewClientConnectionWithPings(clientSide, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl, streams, rtSide, results
}

func openStream(t *testing.T, c httpstream.Connection, kind string) httpstream.Stream {
	t.Helper()
	h := http.Header{}
	h.Set("streamType", kind)
	s, err := c.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRelayTellsTheClientWhenCut: a runtime whose connection resets before
// it sent the status leaves the client an error on its error stream (a
// v4 Status, or text for older protocols), never an error stream that just
// ends, which client-go reads as success. The client's pings are answered
// by the relay and never reach the runtime.
func TestRelayTellsTheClientWhenCut(t *testing.T) {
	defer verifyNoLeaks(t, goleak.IgnoreCurrent())
	for _, protocol := range []string{RuntimeProtocol, "v3.channel.k8s.io"} {
		t.Run(protocol, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.CloseGrace = time.Second
			cl, streams, rtSide, results := relayPair(t, protocol, cfg)
			errStream := openStream(t, cl, "error")
			stdout := openStream(t, cl, "stdout")
			var rtStdout httpstream.Stream
			for range 2 {
				if s := <-streams; s.Headers().Get("streamType") == "stdout" {
					rtStdout = s
				}
			}
			if _, err := rtStdout.Write([]byte("partial")); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 7)
			if _, err := io.ReadFull(stdout, got); err != nil || string(got) != "partial" {
				t.Fatalf("stdout %q %v", got, err)
			}
			time.Sleep(100 * time.Millisecond) // a few of the client's pings
			// The runtime dies: a reset, no status.
			_ = rtSide.(*net.TCPConn).SetLinger(0)
			rtSide.Close()
			msg, _ := io.ReadAll(errStream)
			if protocol == RuntimeProtocol {
				var st metav1.Status
				if err := json.Unmarshal(msg, &st); err != nil || st.Status != metav1.StatusFailure {
					t.Fatalf("error stream %q: want a Failure status (%v)", msg, err)
				}
				msg = []byte(st.Message)
			}
			if len(msg) == 0 {
				t.Fatal("the error stream ended empty: the client would report success")
			}
			t.Logf("client told: %s", msg)
			// The relay waits for the client to close (client-go does
			// once the session is over), not a moment less.
			select {
			case res := <-results:
				t.Fatalf("the relay ended before the client closed: %+v", res)
			case <-time.After(200 * time.Millisecond):
			}
			cl.Close()
			res := <-results
			if res.Lost != 1 || res.Err == nil {
				t.Errorf("result %+v: want one error stream told and the runtime's error", res)
			}
			if res.PingsAnswered == 0 {
				t.Errorf("no client ping was answered by the relay")
			}
		})
	}
}

// TestRelayKeepsPingsOffTheRuntime: the runtime sees the client's streams
// and data but none of its PINGs, and a complete session ends with the
// runtime's status verbatim and nothing added.
func TestRelayKeepsPingsOffTheRuntime(t *testing.T) {
	defer verifyNoLeaks(t, goleak.IgnoreCurrent())
	cfg := DefaultConfig()
	cfg.CloseGrace = time.Second
	clientSide, relayClient := tcpPair(t)
	relayRT, rtSide := tcpPair(t)
	results := make(chan RelayResult, 1)
	go func() { results <- RelaySPDY(context.Background(), relayClient, relayRT, RuntimeProtocol, cfg, nil) }()
	rec := &recordingConn{Conn: rtSide}
	streams := make(chan httpstream.Stream, 8)
	srv, err := k8sspdy.NewServerConnection(rec, func(s httpstream.Stream, _ <-chan struct{}) error {
		streams <- s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	clientRec := &recordingConn{Conn: clientSide}
	cl, err := k8sspdy.NewClientConnectionWithPings(clientRec, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	errStream := openStream(t, cl, "error")
	stdin := openStream(t, cl, "stdin")
	if _, err := stdin.Write([]byte("in")); err != nil {
		t.Fatal(err)
	}
	_ = stdin.Close()
	rtStreams := map[string]httpstream.Stream{}
	for range 2 {
		s := <-streams
		rtStreams[s.Headers().Get("streamType")] = s
	}
	if in, err := io.ReadAll(rtStreams["stdin"]); err != nil || string(in) != "in" {
		t.Fatalf("runtime's stdin %q %v", in, err)
	}
	for deadline := time.Now().Add(10 * time.Second); clientRec.frameTypes()[spdy.TypePing] < 5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the client read %d PING replies in 10s, want 5", clientRec.frameTypes()[spdy.TypePing])
		}
	}
	status := []byte(`{"metadata":{},"status":"Success"}`)
	_, _ = rtStreams["error"].Write(status)
	_ = rtStreams["error"].Close()
	msg, _ := io.ReadAll(errStream)
	if string(msg) != string(status) {
		t.Fatalf("error stream %q, want the runtime's status verbatim", msg)
	}
	srv.Close()
	cl.Close()
	res := <-results
	if res.Lost != 0 || res.PingsAnswered < 5 {
		t.Errorf("result %+v: want nothing told, the pings answered", res)
	}
	types := rec.frameTypes()
	if types[spdy.TypePing] != 0 || types[spdy.TypeSynStream] != 2 {
		t.Errorf("runtime read frames by type %v: want 2 SYN_STREAM and no PING", types)
	}
}

// recordingConn keeps what is read from it.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	got []byte
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.got = append(c.got, p[:n]...)
	c.mu.Unlock()
	return n, err
}

// frameTypes counts the SPDY frames read, by control type (data under 0).
func (c *recordingConn) frameTypes() map[uint16]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	types := map[uint16]int{}
	for b := c.got; len(b) >= spdy.HeaderLen; {
		n := spdy.Length(b)
		if spdy.Control(b) {
			types[spdy.ControlType(b)]++
		} else {
			types[0]++
		}
		b = b[min(len(b), spdy.HeaderLen+n):]
	}
	return types
}

// verifyNoLeaks allows spdystream's connections the second their shutdown
// takes after a connection dies.
func verifyNoLeaks(t *testing.T, opts ...goleak.Option) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = goleak.Find(opts...); err == nil {
			return
		}
	}
	t.Error(err)
}
