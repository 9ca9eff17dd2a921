// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/audit"
	pfapp "github.com/kubestream/kubestream/cmd/kubectl-kubestream/app"
	"github.com/kubestream/kubestream/cmd/kubestream/app"
	"github.com/kubestream/kubestream/internal/wiretest"
	"github.com/kubestream/kubestream/portmux"
)

// withModes turns on both modes for every pod, host-network ones included:
// on the reference runtime a pod's network is the host's.
func withModes(o *app.ServeOptions) {
	o.PortForwardModes.Reverse, o.PortForwardModes.UDP = "on", "on"
	o.PortForwardModes.AllowHostNetwork = true
}

// On the reference runtime a pod's network is the host's loopback, so
// "inside the pod" is 127.0.0.1 here.
func requireReferenceRuntime(t *testing.T) {
	if rt.endpoint != "" {
		t.Skip("the pod's network is this host's only on the embedded reference runtime")
	}
}

func freeLocalPort(t *testing.T, network string) uint16 {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return uint16(c.LocalAddr().(*net.UDPAddr).Port)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// modeSession runs the plugin's client against the node until stop.
type modeSession struct {
	cancel context.CancelFunc
	done   chan error
}

func (n *node) startMode(t *testing.T, pod string, o pfapp.Options, ports ...uint16) *modeSession {
	t.Helper()
	q := url.Values{}
	for _, p := range ports {
		q.Add("port", fmt.Sprint(p))
	}
	u, _ := url.Parse(n.run.URL + "/portForward/default/" + pod + "?" + q.Encode())
	ready := make(chan uint16, len(ports))
	o.Pod, o.Ready = pod, ready
	ctx, cancel := context.WithCancel(context.Background())
	s := &modeSession{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- pfapp.Run(ctx, n.restConfig(), u, o) }()
	for range ports {
		select {
		case <-ready:
		case err := <-s.done:
			t.Fatalf("session ended before it was ready: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("session not ready")
		}
	}
	return s
}

func (s *modeSession) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("session: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("session did not end")
	}
}

// TestReversePortForward: 100 HTTP requests, 10 at once, made inside the
// pod reach a local server through the reverse listener, every body
// intact; a local service that refuses ends its own connections alone.
func TestReversePortForward(t *testing.T) {
	requireReferenceRuntime(t)
	n := startNode(t, withModes)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.URL.Path, strings.Repeat(r.URL.Path, 2000))
	}))
	defer srv.Close()
	localPort := srv.Listener.Addr().(*net.TCPAddr).Port
	refused := freeLocalPort(t, "tcp") // nothing listens there
	podHTTP, podRefused := freeLocalPort(t, "tcp"), freeLocalPort(t, "tcp")
	var out bytes.Buffer
	s := n.startMode(t, "demo", pfapp.Options{Reverse: true, Out: &syncWriter{w: &out},
		Mappings: []string{fmt.Sprintf("%d:%d", podHTTP, localPort), fmt.Sprintf("%d:%d", podRefused, refused)}}, podHTTP, podRefused)

	get := func(i int) error {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
		path := fmt.Sprintf("/r%d", i)
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", podHTTP, path))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if want := path + " " + strings.Repeat(path, 2000); err != nil || string(body) != want {
			return fmt.Errorf("request %d: %d bytes, %v", i, len(body), err)
		}
		return nil
	}
	sem := make(chan struct{}, 10)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		sem <- struct{}{}
		go func() { defer wg.Done(); defer func() { <-sem }(); errs <- get(i) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // the refused port's connections end, its listener stays
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", podRefused))
		switch {
		case errors.Is(err, syscall.ECONNRESET):
			// The refusal's reset came back before the dial looked at its
			// socket (loopback, a loaded machine): accepted, then ended.
		case err != nil:
			t.Fatalf("the listener went away after a refused connection: %v", err)
		default:
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Read(make([]byte, 1))
			c.Close()
			if ne, ok := err.(net.Error); err == nil || (ok && ne.Timeout()) {
				t.Fatalf("a connection the local service refused did not end: %v", err)
			}
		}
		if err := get(1000); err != nil {
			t.Fatalf("the other port after a refusal: %v", err)
		}
	}
	s.stop(t)
	for _, want := range []string{fmt.Sprintf("Forwarding from pod/demo:%d -> 127.0.0.1:%d", podHTTP, localPort),
		fmt.Sprintf("Handling connection for %d", localPort)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	n.waitIdle(10 * time.Second) // the node's end closes its listeners before it counts as ended
	if _, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", podHTTP)); err == nil {
		t.Error("the pod's listener outlived the session")
	}
}

// TestUDPPortForward: 1,000 datagrams of mixed sizes up to 64 KiB each
// come back from an echo server in the pod whole.
func TestUDPPortForward(t *testing.T) {
	requireReferenceRuntime(t)
	n := startNode(t, withModes)
	echo, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 1<<16)
		for {
			k, from, err := echo.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteToUDP(buf[:k], from)
		}
	}()
	podPort := uint16(echo.LocalAddr().(*net.UDPAddr).Port)
	local := freeLocalPort(t, "udp")
	s := n.startMode(t, "demo", pfapp.Options{Mappings: []string{fmt.Sprintf("%d:%d", local, podPort)}}, podPort)
	peer, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(local)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	rng := rand.New(rand.NewSource(47))
	buf := make([]byte, 1<<17)
	var prev []byte
	for i := range 1000 {
		size := 1 + rng.Intn(portmux.MaxDatagram)
		if i%3 == 0 {
			size = 1 + rng.Intn(1500)
		}
		d := make([]byte, size)
		rng.Read(d)
		if err := wiretest.UDPRoundTrip(peer, d, prev, 2*time.Second, buf); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		prev = d
	}
	s.stop(t)
	n.waitIdle(10 * time.Second)
}

// TestPortForwardModesRefusals: a port in use is an HTTP error before any
// session; a stock kubelet's 403 is told apart from kubestream's; the
// node's 403 offers the modes; a deleted pod ends the session, said.
func TestPortForwardModesRefusals(t *testing.T) {
	requireReferenceRuntime(t)
	n := startNode(t, withModes, func(o *app.ServeOptions) { o.ReferencePods = append(o.ReferencePods, "default/doomed/c=sleep 3600") })
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := uint16(busy.Addr().(*net.TCPAddr).Port)
	u, _ := url.Parse(fmt.Sprintf("%s/portForward/default/demo?port=%d", n.run.URL, port))
	err = pfapp.Run(context.Background(), n.restConfig(), u, pfapp.Options{Reverse: true, Mappings: []string{fmt.Sprint(port)}})
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("a port in use: %v", err)
	}

	stock := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer stock.Close()
	su, _ := url.Parse(stock.URL + "/portForward/default/demo?port=80")
	var ns *pfapp.NotServedError
	if err := pfapp.Run(context.Background(), n.restConfig(), su, pfapp.Options{Mappings: []string{"80"}}); !errors.As(err, &ns) {
		t.Fatalf("a stock kubelet's 403: %v, want NotServedError", err)
	}

	d := websocket.Dialer{TLSClientConfig: n.tlsConfig(n.certs.ClientCert, n.certs.ClientKey), Subprotocols: []string{"v9.nothing"}}
	_, resp, err := d.Dial("wss"+strings.TrimPrefix(n.run.URL, "https")+"/portForward/default/demo?port=80", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an unknown subprotocol: %v", err)
	}
	resp.Body.Close()
	if acc := resp.Header.Get("X-Accepted-Stream-Protocol-Versions"); !strings.Contains(acc, portmux.ReverseProtocol) || !strings.Contains(acc, portmux.UDPProtocol) {
		t.Fatalf("403 accepted list %q lacks the modes", acc)
	}

	podPort := freeLocalPort(t, "tcp")
	s := n.startMode(t, "doomed", pfapp.Options{Reverse: true, Mappings: []string{fmt.Sprintf("%d:%d", podPort, freeLocalPort(t, "tcp"))}}, podPort)
	if !n.run.Runtime.ForgetPod("default", "doomed") {
		t.Fatal("no pod default/doomed to delete")
	}
	var se *portmux.SessionError
	select {
	case err := <-s.done:
		if !errors.As(err, &se) || se.Message != "pod default/doomed was deleted" {
			t.Fatalf("session ended with %v, want the pod's deletion", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the session outlived its pod")
	}
	n.waitIdle(10 * time.Second)
}

// syncWriter serialises the session's output lines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestPortForwardModesAudit: each mode's session leaves the node's two
// audit records, saying who opened which ports of which pod in which mode,
// and the bytes each way at the end.
func TestPortForwardModesAudit(t *testing.T) {
	requireReferenceRuntime(t)
	path := filepath.Join(t.TempDir(), "audit.log")
	n := startNode(t, withModes, withAudit(path))
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() { // ends when echo closes
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	podPort := freeLocalPort(t, "tcp")
	s := n.startMode(t, "demo", pfapp.Options{Reverse: true,
		Mappings: []string{fmt.Sprintf("%d:%d", podPort, echo.Addr().(*net.TCPAddr).Port)}}, podPort)
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", podPort))
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("audited\n")
	got := make([]byte, len(msg))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("through the reverse forward: %q, %v", got, err)
	}
	c.Close()
	s.stop(t)
	var recs []audit.Event
	waitFor(t, 15*time.Second, func() bool {
		recs = recs[:0]
		for _, e := range auditLog(t, path) {
			if e.Route == "reverse-portforward" {
				recs = append(recs, e)
			}
		}
		return len(recs) == 2
	})
	start, end := recs[0], recs[1]
	if start.Stage != audit.StageResponseStarted || end.Stage != audit.StageResponseComplete || start.AuditID != end.AuditID {
		t.Fatalf("stages %s, %s, IDs %s, %s", start.Stage, end.Stage, start.AuditID, end.AuditID)
	}
	if start.User.Username == "" || start.ObjectRef.Name != "demo" || start.ObjectRef.Namespace != "default" ||
		len(start.Ports) != 1 || start.Ports[0] != int32(podPort) || start.Protocol != portmux.ReverseProtocol {
		t.Errorf("the session's record: %+v", start)
	}
	if end.Bytes["reverse-portforward-up"] == 0 || end.Bytes["reverse-portforward-down"] == 0 {
		t.Errorf("the end record's bytes: %v", end.Bytes)
	}
	if end.Connections == nil || end.Connections.Opened != 1 || end.Connections.Refused != 0 {
		t.Errorf("the end record's connections: %+v, want 1 opened", end.Connections)
	}
}

// TestPortForwardModesOperator: the plugin against nodes whose operator
// left the modes off (the default), kept them from host-network pods, or
// capped the ports: each refusal is the node's, said in the plugin's
// words, and nothing is bound in the pod.
func TestPortForwardModesOperator(t *testing.T) {
	requireReferenceRuntime(t)
	port := freeLocalPort(t, "tcp")
	run := func(n *node, reverse bool, mappings ...string) error {
		o := pfapp.Options{Reverse: reverse, Mappings: mappings}
		ms, err := o.Parse()
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(n.run.URL + "/portForward/default/demo")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return pfapp.Run(ctx, n.restConfig(), pfapp.Query(u, "port", ms), o)
	}
	mapping := fmt.Sprintf("%d:%d", port, freeLocalPort(t, "tcp"))
	var ns *pfapp.NotServedError
	if err := run(startNode(t), true, mapping); !errors.As(err, &ns) {
		t.Fatalf("reverse on a node with the modes off: %v, want the node not serving it", err)
	}
	if err := run(startNode(t), false, fmt.Sprint(freeLocalPort(t, "udp"))); !errors.As(err, &ns) {
		t.Fatalf("UDP on a node with the modes off: %v, want the node not serving it", err)
	}
	hostOff := startNode(t, withModes, func(o *app.ServeOptions) { o.PortForwardModes.AllowHostNetwork = false })
	if err := run(hostOff, true, mapping); err == nil || !strings.Contains(err.Error(), "node's network") {
		t.Fatalf("reverse to a host-network pod not allowed: %v", err)
	}
	capped := startNode(t, withModes, func(o *app.ServeOptions) { o.PortForwardModes.MaxPorts = 2 })
	many := []string{mapping}
	for i := range 3 {
		many = append(many, fmt.Sprintf("%d:%d", 40000+i, port))
	}
	if err := run(capped, true, many...); err == nil || !strings.Contains(err.Error(), "at most 2") {
		t.Fatalf("four ports where two are allowed: %v", err)
	}
	for _, n := range []*node{hostOff, capped} {
		n.waitIdle(10 * time.Second) // a refusal leaves no session (and so no listener) behind
	}
}
