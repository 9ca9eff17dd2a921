// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
)

// withWebSocketRuntime gives the node an embedded reference runtime of its
// own that speaks v5 and the port-forward tunnel itself, as a runtime
// implementing KEP-4006 would (containerd and cri-streaming do not).
func withWebSocketRuntime() nodeOption {
	return func(o *app.ServeOptions) {
		o.ContainerRuntimeEndpoint = ""
		o.ReferenceWebSockets = true
	}
}

func withDirect(mode string) nodeOption {
	return func(o *app.ServeOptions) { o.RuntimeWebSocketStreaming = mode }
}

func (n *node) offers(sub, result string) float64 {
	return n.metricSum("kubestream_runtime_websocket_offers_total", map[string]string{"subresource": sub, "result": result})
}

// TestDirectWebSocket: with a runtime that speaks the client's protocol,
// kubestream detects it and passes the WebSocket through unchanged, and
// every guarantee still holds end to end with client-go's own clients.
func TestDirectWebSocket(t *testing.T) {
	n := startNode(t, withWebSocketRuntime())

	t.Run("exec", func(t *testing.T) {
		r := n.exec("websocket", nil, "sh", "-c", "echo out; echo err >&2; exit 3")
		assertExit(t, r.err, 3)
		if r.stdout != "out\n" || r.stderr != "err\n" || r.protocol != "websocket" {
			t.Fatalf("stdout %q stderr %q protocol %q", r.stdout, r.stderr, r.protocol)
		}
		data := make([]byte, 4<<20)
		_, _ = rand.Read(data)
		r = n.exec("websocket", bytes.NewReader(data), "wc", "-c")
		assertExit(t, r.err, 0)
		if strings.TrimSpace(r.stdout) != fmt.Sprint(len(data)) {
			t.Fatalf("wc -c read %q, want %d: stdin's half-close must reach the command", r.stdout, len(data))
		}
		r = n.exec("websocket", nil, "seq", "1", "300000")
		assertExit(t, r.err, 0)
		checkSeq(t, r.stdout, 300000)
		if got := n.requests("exec", "direct"); got != 3 {
			t.Errorf("%v exec sessions went direct, want 3", got)
		}
		if n.requests("exec", "translated") != 0 || n.offers("exec", "refused") != 0 {
			t.Errorf("translated %v, refused %v; want none", n.requests("exec", "translated"), n.offers("exec", "refused"))
		}
	})

	t.Run("attach", func(t *testing.T) {
		r, seen := attachEcho(n)
		if !seen || n.requests("attach", "direct") != 1 {
			t.Fatalf("echo seen %v, direct attach sessions %v: %+v", seen, n.requests("attach", "direct"), r)
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		port := tcpEcho(t)
		local, stop := openForward(t, n, "websocket", "demo", port)
		defer stop()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- echoCheck(local[0], []byte(strings.Repeat(fmt.Sprintf("direct %d ", i), 1000)))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := bulkEcho(local[0], 16<<20); err != nil {
			t.Fatal(err)
		}
		if n.requests("portforward", "direct") != 1 {
			t.Fatalf("port-forward routes: direct %v tunneled %v", n.requests("portforward", "direct"), n.requests("portforward", "tunneled"))
		}
	})

	t.Run("spdy-still-proxied", func(t *testing.T) {
		r := n.exec("spdy", nil, "echo", "spdy")
		assertExit(t, r.err, 0)
		if r.stdout != "spdy\n" || n.requests("exec", "proxied-spdy") != 1 {
			t.Fatalf("stdout %q, proxied-spdy %v", r.stdout, n.requests("exec", "proxied-spdy"))
		}
	})
	n.waitIdle(15 * time.Second)
}

// attachEcho attaches to pod echo over v5, sends "direct" and detaches
// once the echo came back (or after 30 s); seen says whether it did.
func attachEcho(n *node) (execResult, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := &lineCancel{cancel: cancel}
	// stdin stays open: closing it would end the attach before the echo.
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("direct\n")) }()
	r := n.stream(ctx, n.execURL("attach", "echo", "echo", true, false),
		streamOpts{protocol: "websocket", stdin: pr, stdout: out})
	return r, out.seen()
}

// lineCancel ends the attach once the echo came back (the container keeps
// running, so only the client can end it).
type lineCancel struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	cancel func()
}

func (l *lineCancel) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if bytes.Contains(l.buf.Bytes(), []byte("echo: direct\n")) {
		l.cancel()
	}
	return len(p), nil
}

func (l *lineCancel) seen() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Contains(l.buf.Bytes(), []byte("echo: direct\n"))
}

// TestDirectFallback: a runtime that refuses the WebSocket (the shared
// backend: cri-streaming or containerd) costs one offer; kubestream then
// translates with a fresh URL, the user sees nothing of it, and the refusal
// is remembered. With --runtime-websocket-streaming=never even a runtime
// that speaks it is not offered anything.
func TestDirectFallback(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		n := startNode(t)
		for i := 0; i < 3; i++ {
			r := n.exec("websocket", strings.NewReader("in"), "cat")
			assertExit(t, r.err, 0)
			if r.stdout != "in" {
				t.Fatalf("session %d: stdout %q", i, r.stdout)
			}
		}
		if n.offers("exec", "refused") != 1 || n.offers("exec", "accepted") != 0 || n.requests("exec", "translated") != 3 {
			t.Fatalf("offers refused %v accepted %v, translated %v; want 1, 0, 3",
				n.offers("exec", "refused"), n.offers("exec", "accepted"), n.requests("exec", "translated"))
		}
		local, stop := openForward(t, n, "websocket", "demo", tcpEcho(t))
		defer stop()
		if err := echoCheck(local[0], []byte("after a refused tunnel offer")); err != nil {
			t.Fatal(err)
		}
		if n.offers("portforward", "refused") != 1 || n.requests("portforward", "tunneled") != 1 {
			t.Fatalf("port-forward: refused %v, tunneled %v", n.offers("portforward", "refused"), n.requests("portforward", "tunneled"))
		}
	})
	t.Run("never", func(t *testing.T) {
		n := startNode(t, withWebSocketRuntime(), withDirect("never"))
		r := n.exec("websocket", nil, "echo", "translated")
		assertExit(t, r.err, 0)
		if r.stdout != "translated\n" || n.requests("exec", "translated") != 1 || n.offers("exec", "accepted")+n.offers("exec", "refused") != 0 {
			t.Fatalf("stdout %q, translated %v, offers %v", r.stdout, n.requests("exec", "translated"),
				n.offers("exec", "accepted")+n.offers("exec", "refused"))
		}
	})
}

// TestDirectSessionEnds: a spliced session ends promptly whichever side
// goes — the runtime crashing, the client leaving, the node shutting down —
// and leaves no goroutine behind (the suite's leak check).
func TestDirectSessionEnds(t *testing.T) {
	start := func(t *testing.T, n *node, ctx context.Context) <-chan execResult {
		t.Helper()
		up := &lineSignal{ch: make(chan struct{})}
		done := make(chan execResult, 1)
		go func() {
			done <- n.stream(ctx, n.execURL("exec", "demo", "app", false, false, "sh", "-c", "echo up; exec sleep 60"),
				streamOpts{protocol: "websocket", stdout: up})
		}()
		waitSignal(t, up)
		if n.requests("exec", "direct") != 1 {
			t.Fatalf("session not direct")
		}
		return done
	}
	wait := func(t *testing.T, done <-chan execResult, wantErr bool) {
		t.Helper()
		select {
		case res := <-done:
			if wantErr && res.err == nil {
				t.Error("session ended without an error")
			}
			t.Logf("session ended: %v", res.err)
		case <-time.After(20 * time.Second):
			t.Fatal("session outlived its end")
		}
	}
	t.Run("runtime-crash", func(t *testing.T) {
		n := startNode(t, withWebSocketRuntime())
		done := start(t, n, context.Background())
		n.run.Runtime.Stop()
		select {
		case res := <-done:
			// The runtime vanished between frames: kubestream says so on
			// the error channel instead of a bare close.
			if res.err == nil || !strings.Contains(res.err.Error(), "container runtime connection lost") {
				t.Fatalf("session ended with %v; want the node's status saying the runtime connection was lost", res.err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("session outlived the runtime")
		}
		n.waitIdle(15 * time.Second)
	})
	t.Run("client-leaves", func(t *testing.T) {
		n := startNode(t, withWebSocketRuntime())
		ctx, cancel := context.WithCancel(context.Background())
		done := start(t, n, ctx)
		cancel()
		wait(t, done, false)
		n.waitIdle(15 * time.Second)
	})
	t.Run("node-shutdown", func(t *testing.T) {
		n := startNode(t, withWebSocketRuntime())
		done := start(t, n, context.Background())
		n.run.Stop()
		select {
		case res := <-done:
			if res.err == nil || !strings.Contains(res.err.Error(), "shutting down") {
				t.Fatalf("session ended with %v; want the node's status saying it is shutting down", res.err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("session outlived the node")
		}
	})
}
