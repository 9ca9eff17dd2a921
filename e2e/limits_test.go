// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
)

// TestSessionLimits: over --max-streaming-sessions-per-pod or
// --max-streaming-sessions a request gets 429 with Retry-After before any
// CRI call, counted; the sessions already running go on.
func TestSessionLimits(t *testing.T) {
	n := startNode(t, func(o *app.ServeOptions) { o.MaxStreamingSessions, o.MaxStreamingSessionsPerPod = 3, 2 })
	cat := "command=cat&input=1&output=1&error=1"
	open := []*websocket.Conn{n.v5Conn(t, cat), n.v5Conn(t, cat)}
	status, hdr, body := n.rawUpgrade("GET", "/exec/default/demo/app?"+cat, wsHeaders("v5.channel.k8s.io"), n.certs.ClientCert, n.certs.ClientKey)
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || !strings.Contains(body, "pod") {
		t.Fatalf("third session on one pod: %d %q %q; want 429 with Retry-After naming the pod limit", status, hdr.Get("Retry-After"), body)
	}
	// Another pod still has room on the node: one more.
	d := websocket.Dialer{TLSClientConfig: n.tlsConfig(n.certs.ClientCert, n.certs.ClientKey), Subprotocols: []string{"v5.channel.k8s.io"}}
	third, _, err := d.Dial(strings.Replace(n.run.URL, "https://", "wss://", 1)+"/attach/default/echo/echo?input=1&output=1", nil)
	if err != nil {
		t.Fatalf("a session on another pod: %v", err)
	}
	defer third.Close()
	status, _, body = n.rawUpgrade("POST", "/portForward/default/term", spdyHeaders("portforward.k8s.io"), n.certs.ClientCert, n.certs.ClientKey)
	if status != http.StatusTooManyRequests || !strings.Contains(body, "node") {
		t.Fatalf("fourth session on the node: %d %q; want 429 naming the node limit", status, body)
	}
	if got := n.metricSum("kubestream_streaming_sessions_limited_total", nil); got != 2 {
		t.Errorf("limited requests counted %v, want 2", got)
	}
	// The running sessions were not cut: each still echoes.
	for i, c := range open {
		msg := fmt.Sprintf("still running %d", i)
		if err := c.WriteMessage(websocket.BinaryMessage, append([]byte{0}, msg...)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			_, got, err := c.ReadMessage()
			if err != nil {
				t.Fatalf("session %d: %v", i, err)
			}
			if string(got) == "\x01"+msg {
				break
			}
		}
		c.Close()
	}
	third.Close()
	n.waitIdle(10 * time.Second)
	// With the slots back, a new session is served. A session counts as
	// ended just before its handler gives its slot back: the first try
	// may still find them taken.
	var res execResult
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res = n.exec("websocket", nil, "echo", "room again"); res.err == nil || time.Now().After(deadline) {
			break
		}
	}
	if res.err != nil || res.stdout != "room again\n" {
		t.Fatalf("after the sessions ended: %q %v", res.stdout, res.err)
	}
}

// TestUnauthenticatedConnectionsCannotLinger: a keep-alive connection idle
// past the idle timeout is closed, and a request whose body never comes is
// cut off at the request read timeout.
func TestUnauthenticatedConnectionsCannotLinger(t *testing.T) {
	n := startNode(t, func(o *app.ServeOptions) {
		o.IdleConnectionTimeout, o.RequestReadTimeout = 500*time.Millisecond, time.Second
	})
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", n.run.Addr, n.tlsConfig("", ""))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	idle := dial()
	fmt.Fprintf(idle, "GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n")
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	start := time.Now()
	if _, err := br.ReadByte(); err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("idle keep-alive connection still open after %v (%v)", time.Since(start), err)
	}
	noBody := dial()
	fmt.Fprintf(noBody, "POST /metrics HTTP/1.1\r\nHost: node\r\nContent-Length: 1000\r\n\r\n")
	start = time.Now()
	_, _ = io.Copy(io.Discard, noBody)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("a request whose body never came held its connection %v", d)
	}
}

// TestConnectionFlood: under a 1,024-descriptor limit, more idle
// connections than descriptors do not stop a legitimate exec: the oldest
// idle ones are closed to admit new ones (counted).
func TestConnectionFlood(t *testing.T) {
	if rt.endpoint != "" {
		t.Log("the embedded runtime is not in the serve process here; the budget holds the same")
	}
	b := serveBinary(t, []string{"prlimit", "--nofile=1024:1024"})
	host := strings.TrimPrefix(b.url, "https://")
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for i := 0; i < 1100; i++ {
		c, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			continue
		}
		flood = append(flood, c)
	}
	time.Sleep(500 * time.Millisecond) // let the server accept what it can
	n := &node{t: t, certs: b.certs, run: &app.Running{URL: b.url, Addr: host}}
	// Well inside the 30 s the flood's connections would take to time out
	// on their own.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	res := n.stream(ctx, n.execURL("exec", "demo", "app", false, false, "echo", "served"), streamOpts{protocol: "websocket"})
	t.Logf("exec served in %v beside %d idle connections", time.Since(start), len(flood))
	if res.err != nil || res.stdout != "served\n" {
		t.Fatalf("exec during a flood of %d idle connections: %q %v\n%s", len(flood), res.stdout, res.err, b.log.String())
	}
	rc := &rest.Config{Host: b.url, TLSClientConfig: rest.TLSClientConfig{CertFile: b.certs.ClientCert, KeyFile: b.certs.ClientKey, CAFile: b.certs.CA}}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(b.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	hc.CloseIdleConnections()
	if !strings.Contains(string(metrics), "kubestream_idle_connections_evicted_total") || strings.Contains(string(metrics), "kubestream_idle_connections_evicted_total 0\n") {
		t.Errorf("no idle connection was evicted: %s", grepLines(string(metrics), "evicted"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
