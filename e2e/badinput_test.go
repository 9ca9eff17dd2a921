// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
)

// TestAuthAndBadInput: each request a node must refuse, with the status it
// must get.
func TestAuthAndBadInput(t *testing.T) {
	n := startNode(t)
	good, goodKey := n.certs.ClientCert, n.certs.ClientKey
	ws := wsHeaders("v5.channel.k8s.io")
	cases := []struct {
		name      string
		method    string
		path      string
		hdr       http.Header
		cert, key string
		status    int
		contains  string
	}{
		{"no client certificate", "GET", "/exec/default/demo/app?command=ls&output=1", ws, "", "", 401, "Unauthorized"},
		{"certificate from another CA", "GET", "/exec/default/demo/app?command=ls&output=1", ws, n.certs.OtherClientCert, n.certs.OtherClient, 401, "Unauthorized"},
		{"metrics without certificate", "GET", "/metrics", http.Header{}, "", "", 401, "Unauthorized"},
		{"unknown pod", "GET", "/exec/default/nope/app?command=ls&output=1", ws, good, goodKey, 404, "pod default/nope not found"},
		{"unknown container", "GET", "/exec/default/demo/nope?command=ls&output=1", ws, good, goodKey, 404, "container nope not found"},
		{"pod UID mismatch", "GET", "/exec/default/demo/wrong-uid/app?command=ls&output=1", ws, good, goodKey, 404, "wrong-uid"},
		{"attach to unknown pod", "GET", "/attach/default/nope/app?output=1", ws, good, goodKey, 404, "not found"},
		{"port-forward to unknown pod", "GET", "/portForward/default/nope", wsHeaders("SPDY/3.1+portforward.k8s.io"), good, goodKey, 404, "not found"},
		{"no stream requested", "GET", "/exec/default/demo/app?command=ls", ws, good, goodKey, 400, "at least 1 of stdin, stdout, stderr"},
		{"exec without command", "GET", "/exec/default/demo/app?output=1", ws, good, goodKey, 400, "command"},
		{"malformed port", "GET", "/portForward/default/demo?port=http", wsHeaders("v4.channel.k8s.io"), good, goodKey, 400, "invalid port"},
		{"port out of range", "POST", "/portForward/default/demo?port=70000", spdyHeaders("portforward.k8s.io"), good, goodKey, 400, "invalid port"},
		{"pod name not UTF-8", "GET", "/exec/default/%ff/app?command=ls&output=1", ws, good, goodKey, 400, "invalid pod name"},
		{"namespace not a name", "GET", "/exec/Not_A_Namespace/demo/app?command=ls&output=1", ws, good, goodKey, 400, "invalid namespace"},
		{"container name not UTF-8", "GET", "/attach/default/demo/%ff%fe?output=1", ws, good, goodKey, 400, "invalid container name"},
		{"port-forward pod not UTF-8", "GET", "/portForward/default/%ff", wsHeaders("SPDY/3.1+portforward.k8s.io"), good, goodKey, 400, "invalid pod name"},
		{"uid not UTF-8", "GET", "/exec/default/demo/%ff/app?command=ls&output=1", ws, good, goodKey, 400, "invalid pod UID"},
		{"unsupported protocol", "GET", "/exec/default/demo/app?command=ls&output=1", wsHeaders("v7.channel.k8s.io"), good, goodKey, 403, "accepted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := n.rawUpgrade(tc.method, tc.path, tc.hdr, tc.cert, tc.key)
			if status != tc.status || !strings.Contains(body, tc.contains) {
				t.Errorf("got %d %q; want %d containing %q", status, body, tc.status, tc.contains)
			}
		})
	}
	t.Run("metrics with a certificate", func(t *testing.T) {
		status, hdr, body := n.rawUpgrade("GET", "/metrics", http.Header{}, good, goodKey)
		if status != 200 || !strings.Contains(hdr.Get("Content-Type"), "text/plain") ||
			!strings.Contains(body, "kubestream_streaming_requests_total") {
			t.Errorf("got %d %q %.200q", status, hdr.Get("Content-Type"), body)
		}
	})
	t.Run("healthz needs no certificate", func(t *testing.T) {
		if status, _, body := n.rawUpgrade("GET", "/healthz", http.Header{}, "", ""); status != 200 || body != "ok" {
			t.Errorf("got %d %q", status, body)
		}
	})
	n.waitIdle(10 * time.Second)
}

// v5Conn opens a raw v5 WebSocket, so tests can send what client-go never
// would.
func (n *node) v5Conn(t *testing.T, query string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{TLSClientConfig: n.tlsConfig(n.certs.ClientCert, n.certs.ClientKey),
		Subprotocols: []string{"v5.channel.k8s.io"}, HandshakeTimeout: 10 * time.Second}
	u := strings.Replace(n.run.URL, "https://", "wss://", 1) + "/exec/default/demo/app?" + query
	c, resp, err := d.Dial(u, nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readUntilClose collects a raw session's channel-3 status and close code.
func readUntilClose(t *testing.T, c *websocket.Conn) (*metav1.Status, int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var st *metav1.Status
	var out strings.Builder
	for {
		mt, data, err := c.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return st, ce.Code, out.String()
			}
			t.Fatalf("session ended without a close frame: %v", err)
		}
		if mt != websocket.BinaryMessage || len(data) == 0 {
			continue
		}
		switch data[0] {
		case 1, 2:
			out.Write(data[1:])
		case 3:
			st = &metav1.Status{}
			if err := json.Unmarshal(data[1:], st); err != nil {
				t.Fatalf("bad status %q: %v", data[1:], err)
			}
		}
	}
}

// TestMalformedFrames: protocol errors end the session with a 400 status on
// channel 3 and a normal close, never a hang or a silent close.
func TestMalformedFrames(t *testing.T) {
	n := startNode(t)
	stdinCat := "command=cat&input=1&output=1&error=1"
	cases := []struct {
		name     string
		query    string
		msgType  int
		frame    []byte
		contains string
	}{
		{"text message", stdinCat, websocket.TextMessage, []byte("\x00hello"), "binary"},
		{"unknown channel", stdinCat, websocket.BinaryMessage, []byte{9, 'x'}, "unknown client channel 9"},
		{"client writes stdout", stdinCat, websocket.BinaryMessage, []byte{1, 'x'}, "unknown client channel 1"},
		{"close signal too long", stdinCat, websocket.BinaryMessage, []byte{255, 0, 0}, "exactly [255, channel]"},
		{"close signal too short", stdinCat, websocket.BinaryMessage, []byte{255}, "exactly [255, channel]"},
		{"close of stdout", stdinCat, websocket.BinaryMessage, []byte{255, 1}, "cannot close"},
		{"stdin without input=1", "command=cat&output=1", websocket.BinaryMessage, []byte{0, 'x'}, "stdin, which is not open"},
		{"resize without tty", stdinCat, websocket.BinaryMessage, []byte("\x04{\"Width\":1,\"Height\":1}"), "resize without a tty"},
		{"bad resize JSON", "command=sh&command=-c&command=sleep+30&input=1&output=1&tty=1", websocket.BinaryMessage, []byte("\x04{\"Width\":\"wide\"}"), "invalid resize"},
		{"resize JSON garbage", "command=sh&command=-c&command=sleep+30&input=1&output=1&tty=1", websocket.BinaryMessage, []byte("\x04not json"), "invalid resize"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := n.v5Conn(t, tc.query)
			if err := c.WriteMessage(tc.msgType, tc.frame); err != nil {
				t.Fatal(err)
			}
			st, code, _ := readUntilClose(t, c)
			if st == nil || st.Code != 400 || st.Reason != metav1.StatusReasonBadRequest || !strings.Contains(st.Message, tc.contains) {
				t.Fatalf("status %+v; want 400 BadRequest mentioning %q", st, tc.contains)
			}
			if code != websocket.CloseNormalClosure {
				t.Errorf("close code %d, want 1000", code)
			}
		})
	}
	t.Run("oversized message", func(t *testing.T) {
		c := n.v5Conn(t, stdinCat)
		big := make([]byte, 2<<20) // over the 1 MiB limit
		_ = c.WriteMessage(websocket.BinaryMessage, big)
		_, code, _ := readUntilClose(t, c)
		if code != websocket.CloseMessageTooBig {
			t.Fatalf("close code %d, want 1009", code)
		}
	})
	t.Run("empty messages are ignored", func(t *testing.T) {
		c := n.v5Conn(t, stdinCat)
		for _, m := range [][]byte{{}, {0, 'h', 'i'}, {}, {255, 0}} {
			if err := c.WriteMessage(websocket.BinaryMessage, m); err != nil {
				t.Fatal(err)
			}
		}
		st, code, out := readUntilClose(t, c)
		if st == nil || st.Status != metav1.StatusSuccess || out != "hi" || code != websocket.CloseNormalClosure {
			t.Fatalf("status %+v out %q code %d", st, out, code)
		}
	})
	n.waitIdle(10 * time.Second)
}

// TestRuntimeUnavailable: with the runtime gone, a request gets 503 with
// the reason, not a hang.
func TestRuntimeUnavailable(t *testing.T) {
	n := startNode(t)
	if status, _, body := n.rawUpgrade("GET", "/healthz", http.Header{}, "", ""); status != 200 || body != "ok" {
		t.Fatalf("/healthz with the runtime up: %d %q", status, body)
	}
	n.killRuntime(t)
	// /healthz says the node cannot serve sessions, and why; /livez
	// still says the process serves (a liveness probe must not restart
	// it for the runtime's sake).
	if status, _, body := n.rawUpgrade("GET", "/healthz?verbose", http.Header{}, "", ""); status != http.StatusInternalServerError || !strings.Contains(body, "[-]runtime failed") {
		t.Errorf("/healthz with the runtime gone: %d %q; want 500 naming the runtime check", status, body)
	}
	if status, _, body := n.rawUpgrade("GET", "/livez", http.Header{}, "", ""); status != 200 || body != "ok" {
		t.Errorf("/livez with the runtime gone: %d %q; want 200 ok", status, body)
	}
	start := time.Now()
	status, _, body := n.rawUpgrade("GET", "/exec/default/demo/app?command=true&output=1", wsHeaders("v5.channel.k8s.io"),
		n.certs.ClientCert, n.certs.ClientKey)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "connect") {
		t.Fatalf("got %d %q; want 503 saying the runtime cannot be reached", status, body)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("took %v", d)
	}
}

// TestInsecureDevelopmentHTTP: plain HTTP exists only behind its flag, and
// then serves without authentication.
func TestInsecureDevelopmentHTTP(t *testing.T) {
	n := startNode(t, func(o *app.ServeOptions) { o.InsecureDevelopmentHTTP = true })
	if !strings.HasPrefix(n.run.URL, "http://") {
		t.Fatalf("serving %s", n.run.URL)
	}
	exec, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: n.run.URL}, http.MethodGet,
		n.execURL("exec", "demo", "app", false, false, "echo", "plain"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := exec.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &out}); err != nil || out.String() != "plain\n" {
		t.Fatalf("%q %v", out.String(), err)
	}
	// Without the flag and without certificates, serve refuses to start.
	o := app.NewServeOptions()
	o.Address, o.Port, o.ContainerRuntimeEndpoint = "127.0.0.1", 0, n.run.Endpoint
	if run, err := app.Start(context.Background(), o); err == nil {
		run.Stop()
		t.Fatal("serve started with neither TLS nor --insecure-development-http")
	}
	n.waitIdle(10 * time.Second)
}

// TestMalformedHandshakeSpendsNoRuntimeURL: a WebSocket upgrade the node
// refuses (here: no Sec-WebSocket-Key) is refused before any CRI call.
// Runtimes hold at most 1,000 single-use URLs for a minute; when each such
// request spent one, 1,001 of them left every exec on the node a 503.
func TestMalformedHandshakeSpendsNoRuntimeURL(t *testing.T) {
	n := startNode(t)
	hdr := wsHeaders("v5.channel.k8s.io")
	hdr.Del("Sec-WebSocket-Key")
	for i := 0; i < 1001; i++ {
		status, _, body := n.rawUpgrade("GET", "/exec/default/demo/app?command=true&output=1", hdr, n.certs.ClientCert, n.certs.ClientKey)
		if status != http.StatusBadRequest || !strings.Contains(body, "Sec-WebSocket-Key") {
			t.Fatalf("request %d: got %d %q; want 400 naming the key", i, status, body)
		}
	}
	res := n.exec("websocket", nil, "echo", "still served")
	if res.err != nil || res.stdout != "still served\n" {
		t.Fatalf("exec after the malformed upgrades: %q %v", res.stdout, res.err)
	}
	n.waitIdle(10 * time.Second)
}

// TestResizeSplitAcrossMessages: channel 4 is one JSON stream, as upstream
// reads it; a resize object split across two messages resizes the
// terminal instead of ending the session with a 400.
func TestResizeSplitAcrossMessages(t *testing.T) {
	n := startNode(t)
	// The size lands a moment after the shell starts (containerd 1.6 is the
	// slowest): poll for it, as TestResizeAndTTY does.
	script := `for i in $(seq 100); do s=$(stty size 2>/dev/null); [ "$s" = "45 123" ] && break; sleep 0.05; done; echo "size=$s"`
	c := n.v5Conn(t, "command=sh&command=-c&command="+url.QueryEscape(script)+"&input=1&output=1&tty=1")
	for _, m := range [][]byte{[]byte("\x04{\"Width\":1"), []byte("\x0423,\"Height\":45}")} {
		if err := c.WriteMessage(websocket.BinaryMessage, m); err != nil {
			t.Fatal(err)
		}
	}
	st, _, out := readUntilClose(t, c)
	if st == nil || st.Status != metav1.StatusSuccess || !strings.Contains(out, "size=45 123") {
		t.Fatalf("status %+v, output %q; want success and stty size 45 123", st, out)
	}
	n.waitIdle(10 * time.Second)
}

// TestProtocolErrorNeverSuccess: the outside probe's sequence (a message
// on an unknown channel, then stdin, then the close signal) to cat is
// answered BadRequest every time, on both routes: the node's translator
// and, direct, the runtime-side server. The runtime-side server closed the
// process's stdin before it wrote its status: cat exited 0 on the clean
// EOF, and its Success won in 1 to 25 runs of 1,000.
func TestProtocolErrorNeverSuccess(t *testing.T) {
	for _, route := range []struct {
		name string
		opts []nodeOption
	}{{"translated", nil}, {"direct", []nodeOption{withWebSocketRuntime()}}} {
		t.Run(route.name, func(t *testing.T) {
			n := startNode(t, route.opts...)
			for i := range 200 {
				c := n.v5Conn(t, "command=cat&input=1&output=1&error=1")
				for _, m := range [][]byte{{9, 'x'}, append([]byte{0}, "ping\n"...), {255, 0}} {
					if c.WriteMessage(websocket.BinaryMessage, m) != nil {
						break // the node may have closed already
					}
				}
				st, _, out := readUntilClose(t, c)
				c.Close()
				if st == nil || st.Reason != metav1.StatusReasonBadRequest || !strings.Contains(st.Message, "unknown client channel 9") {
					t.Fatalf("run %d: status %+v, stdout %q; want BadRequest for channel 9", i, st, out)
				}
			}
			n.waitIdle(10 * time.Second)
		})
	}
}
