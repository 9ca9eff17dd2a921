// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
)

func withTimeouts(ping, pong, idle time.Duration) nodeOption {
	return func(o *app.ServeOptions) {
		o.WebSocketPingPeriod, o.WebSocketPongTimeout, o.StreamingConnectionIdleTimeout = ping, pong, idle
	}
}

// TestKeepalive: the node pings its clients, drops one that stops
// answering, and closes sessions idle past the idle timeout.
func TestKeepalive(t *testing.T) {
	n := startNode(t, withTimeouts(100*time.Millisecond, 2*time.Second, 1500*time.Millisecond))

	t.Run("pings reach the client", func(t *testing.T) { expectPings(t, n) })
	t.Run("a silent client is dropped", func(t *testing.T) {
		marker := fmt.Sprintf("kubestream-silent-%d", time.Now().UnixNano())
		c := n.v5Conn(t, url.Values{"command": {"sh", "-c", "echo x; cat; : " + marker}, "input": {"1"}, "output": {"1"}}.Encode())
		// Never read: no pongs go back, the node must give up on us.
		waitFor(t, 10*time.Second, func() bool { return processRunning(marker) })
		n.waitIdle(10 * time.Second)
		waitFor(t, 10*time.Second, func() bool { return !processRunning(marker) })
		c.Close()
	})

	t.Run("idle sessions are closed with a status", func(t *testing.T) {
		start := time.Now()
		res := n.exec("websocket", nil, "sleep", "30")
		if res.err == nil || !strings.Contains(res.err.Error(), "idle") {
			t.Fatalf("got %v; want an idle-timeout error", res.err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("idle session closed after %v", d)
		}
	})
	n.waitIdle(10 * time.Second)
}

// expectPings: a one-second v5 session through n sees the node's pings
// (a 100ms period) and ends with its output and status.
func expectPings(t *testing.T, n *node) {
	c := n.v5Conn(t, url.Values{"command": {"sh", "-c", "sleep 1; echo done"}, "output": {"1"}}.Encode())
	var pings atomic.Int32
	c.SetPingHandler(func(data string) error {
		pings.Add(1)
		return c.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	st, code, out := readUntilClose(t, c)
	if st == nil || st.Status != "Success" || out != "done\n" || code != websocket.CloseNormalClosure {
		t.Fatalf("status %+v out %q code %d", st, out, code)
	}
	if pings.Load() < 3 {
		t.Fatalf("client saw %d pings in a second at a 100ms period", pings.Load())
	}
}

// TestKeepaliveDirect: --websocket-ping-period means the same on the
// direct route, where the runtime's WebSocket is spliced through (the
// runtime pings at its own period, far longer here): the node pings
// between the runtime's frames.
func TestKeepaliveDirect(t *testing.T) {
	n := startNode(t, withWebSocketRuntime(), withTimeouts(100*time.Millisecond, 2*time.Second, 10*time.Second))
	expectPings(t, n)
	if got := n.requests("exec", "direct"); got != 1 {
		t.Fatalf("%v exec sessions went direct, want 1", got)
	}
	n.waitIdle(10 * time.Second)
}

// TestIdleTimeoutShorterThanPingPeriod: an idle timeout below the ping
// period (a kubelet's streamingConnectionIdleTimeout of a few seconds with
// the default 30 s pings) still closes the session on time, not at the
// next ping.
func TestIdleTimeoutShorterThanPingPeriod(t *testing.T) {
	// Translated, and spliced to a runtime that speaks v5 itself: the
	// node's idle timeout governs both.
	for _, tc := range []struct {
		name  string
		route string
		opts  []nodeOption
	}{
		{"translated", "translated", nil},
		{"direct", "direct", []nodeOption{withWebSocketRuntime()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "audit.log")
			n := startNode(t, append([]nodeOption{withTimeouts(30*time.Second, 60*time.Second, 2*time.Second), withAudit(log)}, tc.opts...)...)
			start := time.Now()
			res := n.exec("websocket", nil, "sleep", "30")
			if res.err == nil || !strings.Contains(res.err.Error(), "session idle for 2s, closed by the node") {
				t.Fatalf("got %v; want the idle-timeout status", res.err)
			}
			if d := time.Since(start); d < 2*time.Second || d > 6*time.Second {
				t.Fatalf("a session idle past 2s was closed after %v", d)
			}
			if got := n.requests("exec", tc.route); got != 1 {
				t.Fatalf("route %s taken %v times", tc.route, got)
			}
			// The audit record says the node ended it.
			waitFor(t, 10*time.Second, func() bool {
				for _, e := range auditLog(t, log) {
					if e.Stage == "ResponseComplete" && e.EndedBy == "node" {
						return true
					}
				}
				return false
			})
			n.waitIdle(10 * time.Second)
		})
	}
}

// TestIdleDespiteClientPings: pings are no activity. kubectl pings every
// 5 s, more often than a kubelet's idle timeout may be; a session with
// nothing but pings crossing it is idle, translated or spliced.
func TestIdleDespiteClientPings(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []nodeOption
	}{
		{"translated", nil},
		{"direct", []nodeOption{withWebSocketRuntime()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, append([]nodeOption{withTimeouts(30*time.Second, 60*time.Second, 2*time.Second)}, tc.opts...)...)
			c := n.v5Conn(t, "command=sleep&command=30&output=1")
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(300 * time.Millisecond):
						if c.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second)) != nil {
							return
						}
					}
				}
			}()
			start := time.Now()
			st, _, _ := readUntilClose(t, c)
			if st == nil || !strings.Contains(st.Message, "session idle for 2s, closed by the node") {
				t.Fatalf("status %+v; want the idle-timeout status", st)
			}
			if d := time.Since(start); d > 8*time.Second {
				t.Fatalf("closed after %v", d)
			}
		})
	}
}

// TestMemoryBoundedWithStalledReader: a client that stops reading must not
// make anything buffer the stream. Everything (client, kubestream, runtime)
// runs in this process, so the heap bounds them all.
func TestMemoryBoundedWithStalledReader(t *testing.T) {
	n := startNode(t)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	stall := make(chan struct{})
	w := &stallingWriter{stall: stall}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan execResult, 1)
	go func() {
		done <- n.stream(ctx, n.execURL("exec", "demo", "app", false, false, "head", "-c", "1073741824", "/dev/zero"),
			streamOpts{protocol: "websocket", stdout: w})
	}()
	// The writer blocks after its first chunk; give producers time to fill
	// whatever buffers exist.
	time.Sleep(3 * time.Second)
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	growth := int64(during.HeapInuse) - int64(before.HeapInuse)
	cancel()
	close(stall)
	<-done
	t.Logf("heap growth with a stalled reader on a 1 GiB stream: %d KiB", growth/1024)
	if growth > 32<<20 {
		t.Fatalf("heap grew by %d MiB while the reader stalled: something buffers without bound", growth>>20)
	}
	n.waitIdle(15 * time.Second)
}

type stallingWriter struct {
	stall chan struct{}
	n     int
}

func (w *stallingWriter) Write(p []byte) (int, error) {
	w.n++
	if w.n > 1 {
		<-w.stall
	}
	return len(p), nil
}
