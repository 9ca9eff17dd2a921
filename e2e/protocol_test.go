// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
)

// TestProtocolTable runs client-go's own clients through every row of the
// README's protocol table and checks the route kubestream took.
func TestProtocolTable(t *testing.T) {
	n := startNode(t)
	cases := []struct {
		name      string
		sub       string // exec or attach
		protocols []string
		executor  string // websocket, spdy
		route     string
	}{
		{"websocket v5 exec is translated", "exec", []string{"v5.channel.k8s.io"}, "websocket", "translated"},
		{"spdy exec is proxied", "exec", nil, "spdy", "proxied-spdy"},
		{"legacy websocket v4 exec is proxied", "exec", []string{"v4.channel.k8s.io"}, "websocket", "proxied-websocket"},
		{"websocket v5 with v4 offered too is translated", "exec", []string{"v5.channel.k8s.io", "v4.channel.k8s.io"}, "websocket", "translated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := n.requests("exec", tc.route)
			raw := n.execURL("exec", "demo", "app", true, false, "sh", "-c", "read l; echo \"$l\"; echo err >&2; exit 4")
			// read, not cat: legacy v4 WebSocket has no stdin half-close
			var exec remotecommand.Executor
			var err error
			if tc.executor == "spdy" {
				u, _ := url.Parse(raw)
				exec, err = remotecommand.NewSPDYExecutor(n.restConfig(), http.MethodPost, u)
			} else {
				exec, err = remotecommand.NewWebSocketExecutorForProtocols(n.restConfig(), http.MethodGet, raw, tc.protocols...)
			}
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr strings.Builder
			err = exec.StreamWithContext(context.Background(), remotecommand.StreamOptions{
				Stdin: strings.NewReader("hello\n"), Stdout: &stdout, Stderr: &stderr})
			assertExit(t, err, 4)
			if stdout.String() != "hello\n" || stderr.String() != "err\n" {
				t.Errorf("stdout %q stderr %q; want %q and %q", stdout.String(), stderr.String(), "hello\n", "err\n")
			}
			if got := n.requests("exec", tc.route) - before; got != 1 {
				t.Errorf("route %s taken %v times, want 1", tc.route, got)
			}
		})
	}

	t.Run("port-forward tunnel and spdy", func(t *testing.T) {
		port := tcpEcho(t)
		for _, c := range []struct{ protocol, route string }{{"websocket", "tunneled"}, {"spdy", "proxied-spdy"}} {
			before := n.requests("portforward", c.route)
			forwardEcho(t, n, c.protocol, port, []byte("ping through "+c.protocol))
			if got := n.requests("portforward", c.route) - before; got != 1 {
				t.Errorf("%s: route %s taken %v times, want 1", c.protocol, c.route, got)
			}
		}
	})

	t.Run("rejections", func(t *testing.T) {
		cases := []struct {
			name     string
			method   string
			path     string
			hdr      http.Header
			status   int
			contains string
		}{
			{"websocket with unknown subprotocol", "GET", "/exec/default/demo/app?command=ls&output=1", wsHeaders("v9.channel.k8s.io"), 403, "v5.channel.k8s.io"},
			{"spdy with unknown version", "POST", "/exec/default/demo/app?command=ls&output=1", spdyHeaders("v9.channel.k8s.io"), 403, "v4.channel.k8s.io"},
			{"spdy without version header", "POST", "/exec/default/demo/app?command=ls&output=1", spdyHeaders(), 400, "X-Stream-Protocol-Version"},
			{"no upgrade", "GET", "/exec/default/demo/app?command=ls&output=1", http.Header{}, 400, "Upgrade request required"},
			{"unknown upgrade", "GET", "/exec/default/demo/app?command=ls&output=1", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"h2c"}}, 400, "unsupported upgrade"},
			{"port-forward websocket with remotecommand protocol", "GET", "/portForward/default/demo", wsHeaders("v5.channel.k8s.io"), 403, "SPDY/3.1+portforward.k8s.io"},
			{"port-forward spdy with remotecommand protocol", "POST", "/portForward/default/demo", spdyHeaders("v4.channel.k8s.io"), 403, "portforward.k8s.io"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				before := n.metricSum("kubestream_streaming_requests_total", map[string]string{"route": "rejected"})
				status, hdr, body := n.rawUpgrade(tc.method, tc.path, tc.hdr, n.certs.ClientCert, n.certs.ClientKey)
				if status != tc.status || !strings.Contains(body+hdr.Get("X-Accepted-Stream-Protocol-Versions"), tc.contains) {
					t.Errorf("got %d %q (accepted %q); want %d mentioning %q", status, body, hdr.Get("X-Accepted-Stream-Protocol-Versions"), tc.status, tc.contains)
				}
				if n.metricSum("kubestream_streaming_requests_total", map[string]string{"route": "rejected"})-before != 1 {
					t.Errorf("rejection not counted")
				}
			})
		}
	})

	t.Run("the 101 carries an accept key computed from the client's key", func(t *testing.T) {
		status, hdr, _ := n.rawUpgrade("GET", "/exec/default/demo/app?command=true&output=1", wsHeaders("v5.channel.k8s.io"), n.certs.ClientCert, n.certs.ClientKey)
		// RFC 6455's own example key and answer.
		if status != 101 || hdr.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" || hdr.Get("Sec-WebSocket-Protocol") != "v5.channel.k8s.io" {
			t.Errorf("got %d accept %q protocol %q", status, hdr.Get("Sec-WebSocket-Accept"), hdr.Get("Sec-WebSocket-Protocol"))
		}
	})
	n.waitIdle(10 * time.Second)
}

// TestFeatureGateOff: with ExtendWebSocketsToKubelet=false the node is a
// legacy kubelet: v5 gets a non-101 answer, kubectl's fallback moves to
// SPDY and succeeds; the tunnel is refused and the fallback dialer uses SPDY.
func TestFeatureGateOff(t *testing.T) {
	n := startNode(t, withFeature("ExtendWebSocketsToKubelet=false"))

	status, _, body := n.rawUpgrade("GET", "/exec/default/demo/app?command=true&output=1", wsHeaders("v5.channel.k8s.io"), n.certs.ClientCert, n.certs.ClientKey)
	if status == http.StatusSwitchingProtocols || status < 400 {
		t.Fatalf("v5 upgrade with the gate off got %d %q; want a refusal", status, body)
	}

	res := n.exec("auto", strings.NewReader("via fallback\n"), "cat")
	if res.err != nil || res.stdout != "via fallback\n" || res.protocol != "spdy" {
		t.Fatalf("fallback exec: %+v (%v)", res, res.err)
	}
	if n.requests("exec", "translated") != 0 || n.requests("exec", "proxied-spdy") != 1 {
		t.Errorf("routes: translated %v proxied-spdy %v", n.requests("exec", "translated"), n.requests("exec", "proxied-spdy"))
	}

	port := tcpEcho(t)
	forwardEcho(t, n, "auto", port, []byte("fallback forward"))
	if n.requests("portforward", "tunneled") != 0 || n.requests("portforward", "proxied-spdy") != 1 {
		t.Errorf("port-forward routes: tunneled %v proxied-spdy %v", n.requests("portforward", "tunneled"), n.requests("portforward", "proxied-spdy"))
	}
	n.waitIdle(10 * time.Second)
}

// TestFallbackExecutorPrefersWebSocket: kubectl's fallback executor stays
// on the WebSocket when the node answers 101.
func TestFallbackExecutorPrefersWebSocket(t *testing.T) {
	n := startNode(t)
	res := n.exec("auto", strings.NewReader("x"), "cat")
	if res.err != nil || res.stdout != "x" || res.protocol != "websocket" || n.requests("exec", "translated") != 1 {
		t.Fatalf("got %+v, translated %v", res, n.requests("exec", "translated"))
	}
}

// forwardEcho forwards a local port to the echo server's port in pod demo
// and checks a round trip.
func forwardEcho(t *testing.T, n *node, protocol string, port int, payload []byte) {
	t.Helper()
	pf, stop := openForward(t, n, protocol, "demo", port)
	defer stop()
	roundTrip(t, pf[0], payload)
}

func roundTrip(t *testing.T, local uint16, payload []byte) {
	t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", local))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading echo: %v", err)
	}
	if string(got) != string(payload) {
		t.Fatalf("echo %q, want %q", got, payload)
	}
}

// openForward starts client-go's port forwarder to pod's ports and returns
// the local ports and a stop function that waits for it to end.
func openForward(t *testing.T, n *node, protocol, pod string, ports ...int) ([]uint16, func()) {
	t.Helper()
	u, _ := url.Parse(n.run.URL + "/portForward/default/" + pod)
	dialer, err := app.NewPortForwardDialer(n.restConfig(), protocol, u)
	if err != nil {
		t.Fatal(err)
	}
	var specs []string
	for _, p := range ports {
		specs = append(specs, fmt.Sprintf("0:%d", p))
	}
	stopCh, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, specs, stopCh, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errCh := make(chan error, 1)
	go func() { errCh <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errCh:
		t.Fatalf("port-forward (%s) failed: %v", protocol, err)
	case <-time.After(30 * time.Second):
		t.Fatal("port-forward not ready")
	}
	fps, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	var local []uint16
	for _, p := range fps {
		local = append(local, p.Local)
	}
	return local, func() {
		close(stopCh)
		if err := <-errCh; err != nil && !httpstream.IsUpgradeFailure(err) {
			t.Logf("port-forward ended: %v", err)
		}
	}
}
