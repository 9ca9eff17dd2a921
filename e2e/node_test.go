// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
	"github.com/kubestream/kubestream/internal/pki"
	"github.com/kubestream/kubestream/refruntime"
)

func TestMain(m *testing.M) {
	klog.InitFlags(nil)
	flag.Parse()
	if err := setupBackend(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: setting up the runtime:", err)
		teardownBackend()
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "e2e: runtime under test: %s\n", rt.name)
	code := m.Run()
	teardownBackend()
	if code == 0 {
		code = verifyNoLeaks()
	}
	os.Exit(code)
}

// verifyNoLeaks fails the run if goroutines outlive the tests. It waits a
// while first: spdystream's shutdown holds a goroutine for up to a second
// after a connection dies, and client-go's heartbeat ends with its next
// ping (5 s); both end on their own. What is still there after that leaked.
func verifyNoLeaks() int {
	opts := []goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		// Keep-alive connections of clients' http.Transports.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		// lumberjack (the audit log's rotation) starts one goroutine per
		// log file that its Close does not end: one per audit log, not
		// per session.
		goleak.IgnoreTopFunction("gopkg.in/natefinch/lumberjack%2ev2.(*Logger).millRun"),
	}
	var err error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = goleak.Find(opts...); err == nil {
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests:\n%v\n", err)
	return 1
}

// The reference pods every test can use.
var testPods = []refruntime.PodSpec{
	{Namespace: "default", Name: "demo", UID: "uid-demo",
		Containers: []refruntime.ContainerSpec{
			{Name: "app", Command: []string{"/bin/sh"}, Stdin: true},
			{Name: "sleeper", Command: []string{"sleep", "3600"}},
		}},
	{Namespace: "default", Name: "echo", UID: "uid-echo",
		Containers: []refruntime.ContainerSpec{{Name: "echo", Stdin: true,
			Command: []string{"/bin/sh", "-c", `while IFS= read -r l; do echo "echo: $l"; done`}}}},
	// Each container writes as many bytes as its first input line asks
	// and exits: one per slow-reader attach (TestSlowReaderAttach).
	{Namespace: "default", Name: "burst", UID: "uid-burst", Containers: burstContainers(10)},
	{Namespace: "default", Name: "term", UID: "uid-term",
		Containers: []refruntime.ContainerSpec{{Name: "shell", Stdin: true, TTY: true,
			Command: []string{"/bin/sh"}}}},
}

// node is a running kubestream serve on the reference runtime, with the
// credentials an apiserver would hold.
type node struct {
	t     *testing.T
	run   *app.Running
	certs *pki.Files
	// headers go on every request client-go's clients send (Audit-Id, …).
	headers http.Header
}

type nodeOption func(*app.ServeOptions)

func withFeature(gates string) nodeOption {
	return func(o *app.ServeOptions) {
		if err := o.Features.Set(gates); err != nil {
			panic(err)
		}
	}
}

func startNode(t *testing.T, opts ...nodeOption) *node {
	t.Helper()
	certs, err := pki.WriteNodeSet(t.TempDir(), "kube-apiserver-kubelet-client")
	if err != nil {
		t.Fatal(err)
	}
	return startNodeWithCerts(t, certs, opts...)
}

// startNodeWithCerts starts a node serving with certs, so that two nodes
// can share the credentials an apiserver holds for them.
func startNodeWithCerts(t *testing.T, certs *pki.Files, opts ...nodeOption) *node {
	t.Helper()
	dir := t.TempDir()
	podsFile := filepath.Join(dir, "pods.json")
	b, _ := json.Marshal(testPods)
	if err := os.WriteFile(podsFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	o := app.NewServeOptions()
	o.Address, o.Port = "127.0.0.1", 0
	o.TLSCertFile, o.TLSPrivateKeyFile, o.ClientCAFile = certs.ServerCert, certs.ServerKey, certs.CA
	o.ReferencePodsFile = podsFile
	o.ContainerRuntimeEndpoint = rt.endpoint
	for _, opt := range opts {
		opt(o)
	}
	run, err := app.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Stop)
	return &node{t: t, run: run, certs: certs}
}

func (n *node) restConfig() *rest.Config {
	c := &rest.Config{Host: n.run.URL, TLSClientConfig: rest.TLSClientConfig{
		CertFile: n.certs.ClientCert, KeyFile: n.certs.ClientKey, CAFile: n.certs.CA}}
	if n.headers != nil {
		c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return withHeaders{rt, n.headers} }
	}
	return c
}

type withHeaders struct {
	rt http.RoundTripper
	h  http.Header
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.h {
		r.Header[k] = v
	}
	return w.rt.RoundTrip(r)
}

func (n *node) tlsConfig(cert, key string) *tls.Config {
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(n.certs.CA)
	pool.AppendCertsFromPEM(ca)
	cfg := &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			n.t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// execURL builds a kubelet exec URL with the apiserver's query.
func (n *node) execURL(sub, pod, container string, stdin, tty bool, command ...string) string {
	q := url.Values{}
	for _, c := range command {
		q.Add("command", c)
	}
	if stdin {
		q.Set("input", "1")
	}
	q.Set("output", "1")
	if tty {
		q.Set("tty", "1")
	} else {
		q.Set("error", "1")
	}
	return fmt.Sprintf("%s/%s/default/%s/%s?%s", n.run.URL, sub, pod, container, q.Encode())
}

// syncBuffer is a bytes.Buffer safe to read while client-go's copy
// goroutines may still write: StreamWithContext returns on cancellation
// without waiting for them.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// execResult is one finished remotecommand session.
type execResult struct {
	stdout, stderr string
	err            error
	protocol       string
}

type streamOpts struct {
	protocol string // websocket, spdy, auto
	stdin    io.Reader
	tty      bool
	sizes    remotecommand.TerminalSizeQueue
	stdout   io.Writer
}

func (n *node) stream(ctx context.Context, rawURL string, o streamOpts) execResult {
	n.t.Helper()
	var used string
	exec, err := app.NewExecutor(n.restConfig(), o.protocol, rawURL, &used)
	if err != nil {
		n.t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	so := remotecommand.StreamOptions{Stdin: o.stdin, Stdout: &stdout, Tty: o.tty, TerminalSizeQueue: o.sizes}
	if o.stdout != nil {
		so.Stdout = o.stdout
	}
	if !o.tty {
		so.Stderr = &stderr
	}
	err = exec.StreamWithContext(ctx, so)
	return execResult{stdout: stdout.String(), stderr: stderr.String(), err: err, protocol: used}
}

func (n *node) exec(protocol string, stdin io.Reader, command ...string) execResult {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return n.stream(ctx, n.execURL("exec", "demo", "app", stdin != nil, false, command...), streamOpts{protocol: protocol, stdin: stdin})
}

// metricSum adds up a metric's samples whose labels include want.
func (n *node) metricSum(name string, want map[string]string) float64 {
	n.t.Helper()
	mfs, err := n.run.Server.Metrics().Registry.Gather()
	if err != nil {
		n.t.Fatal(err)
	}
	var total float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				total += m.GetCounter().GetValue()
			case m.Gauge != nil:
				total += m.GetGauge().GetValue()
			case m.Histogram != nil:
				total += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return total
}

// requests reads kubestream_streaming_requests_total for a route.
func (n *node) requests(sub, route string) float64 {
	return n.metricSum("kubestream_streaming_requests_total", map[string]string{"subresource": sub, "route": route})
}

func (n *node) activeSessions() float64 {
	return n.metricSum("kubestream_streaming_sessions_active", nil)
}

// waitIdle waits until no session is active: every session ended.
func (n *node) waitIdle(d time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(d)
	for n.activeSessions() != 0 {
		if time.Now().After(deadline) {
			n.t.Fatalf("%v sessions still active after %v", n.activeSessions(), d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawUpgrade sends an upgrade request with the given headers and returns
// the status and body, for the cases client-go would hide.
func (n *node) rawUpgrade(method, path string, hdr http.Header, cert, key string) (int, http.Header, string) {
	n.t.Helper()
	conn, err := tls.Dial("tcp", n.run.Addr, n.tlsConfig(cert, key))
	if err != nil {
		n.t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req, _ := http.NewRequest(method, n.run.URL+path, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	if err := req.Write(conn); err != nil {
		n.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		n.t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(body)
}

func wsHeaders(protocols ...string) http.Header {
	h := http.Header{}
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", "websocket")
	h.Set("Sec-WebSocket-Version", "13")
	h.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if len(protocols) > 0 {
		h.Set("Sec-WebSocket-Protocol", strings.Join(protocols, ", "))
	}
	return h
}

func spdyHeaders(protocols ...string) http.Header {
	h := http.Header{}
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", "SPDY/3.1")
	for _, p := range protocols {
		h.Add("X-Stream-Protocol-Version", p)
	}
	return h
}

// tcpEcho serves an echo on a loopback port of the host (the reference
// runtime's pods share the host network) and returns the port.
func tcpEcho(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		close(done)
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().(*net.TCPAddr).Port
}

func burstContainers(n int) []refruntime.ContainerSpec {
	var out []refruntime.ContainerSpec
	for i := range n {
		out = append(out, refruntime.ContainerSpec{Name: fmt.Sprintf("b%d", i), Stdin: true,
			Command: []string{"sh", "-c", "read n; head -c $n /dev/zero; exit 7"}})
	}
	return out
}

// streamingRequest is one kubelet-API streaming request as an
// authorization test sends it.
type streamingRequest struct {
	name, method, path string
	hdr                http.Header
}

// streamingRequests are exec, attach and port-forward over WebSocket and
// SPDY against pod (its container ctr) and attachPod's attachCtr.
func streamingRequests(pod, ctr, attachPod, attachCtr string) []streamingRequest {
	exec := "/exec/default/" + pod + "/" + ctr + "?command=id&output=1"
	return []streamingRequest{
		{"exec over WebSocket", "GET", exec, wsHeaders("v5.channel.k8s.io")},
		{"exec over SPDY", "POST", exec, spdyHeaders("v4.channel.k8s.io")},
		{"attach over WebSocket", "GET", "/attach/default/" + attachPod + "/" + attachCtr + "?output=1", wsHeaders("v5.channel.k8s.io")},
		{"port-forward tunnel", "GET", "/portForward/default/" + pod, wsHeaders("SPDY/3.1+portforward.k8s.io")},
		{"port-forward over SPDY", "POST", "/portForward/default/" + pod, spdyHeaders("portforward.k8s.io")},
	}
}
