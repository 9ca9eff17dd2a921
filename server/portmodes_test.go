// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/portmux"
)

// fakeSandboxes describes sandbox "sb" as the test sets it, and counts
// the readiness checks.
type fakeSandboxes struct {
	mu     sync.Mutex
	sb     []cri.Sandbox // answered in turn; the last one from then on
	checks atomic.Int64
}

func (f *fakeSandboxes) Sandbox(context.Context, string) (cri.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.sb[0]
	if len(f.sb) > 1 {
		f.sb = f.sb[1:]
	}
	return sb, nil
}

func (f *fakeSandboxes) SandboxReady(context.Context, string) (bool, error) {
	f.checks.Add(1)
	return true, nil
}

// modesServer serves the modes as m says, the pod described by sb.
func modesServer(t *testing.T, m PortForwardModes, sb ...cri.Sandbox) (*Server, *httptest.Server, *fakeSandboxes) {
	t.Helper()
	fs := &fakeSandboxes{sb: sb}
	s, err := New(Config{Lookup: fakeLookup{}, Runtime: &fakeRuntime{base: "http://127.0.0.1:1"}, Sandboxes: fs, PortForwardModes: m})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv, fs
}

// dialMode asks for mode on ports; it returns the WebSocket, or the
// refusal's status and body.
func dialMode(t *testing.T, base, proto, ports string) (*websocket.Conn, int, string) {
	t.Helper()
	q := ""
	for _, p := range strings.Split(ports, ",") {
		q += "&port=" + p
	}
	d := websocket.Dialer{Subprotocols: []string{proto}}
	ws, resp, err := d.Dial("ws"+strings.TrimPrefix(base, "http")+"/portForward/default/demo?"+q[1:], nil)
	if err == nil {
		return ws, http.StatusSwitchingProtocols, ""
	}
	if resp == nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return nil, resp.StatusCode, string(body)
}

func manyPorts(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, 2001+i)
	}
	return b.String()
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// What the operator allows decides: off answers as a node without the
// mode; opt-in serves only annotated pods; host-network pods and
// privileged ports only when allowed; ports are capped and never doubled.
func TestModesServeOnlyWhatTheOperatorAllows(t *testing.T) {
	host := cri.Sandbox{HostNetwork: true}
	annotated := cri.Sandbox{HostNetwork: true, Annotations: map[string]string{ReverseAnnotation: "true"}}
	on := PortForwardModes{Reverse: ModeOn, UDP: ModeOn, AllowHostNetwork: true, MaxPorts: 3}
	port := freePort(t)
	cases := []struct {
		name  string
		modes PortForwardModes
		sb    cri.Sandbox
		proto string
		ports string
		code  int
		says  string
	}{
		{"off by default", DefaultPortForwardModes(), host, portmux.ReverseProtocol, port, 403, "unsupported WebSocket subprotocols"},
		{"udp off, reverse on", PortForwardModes{Reverse: ModeOn, AllowHostNetwork: true}, host, portmux.UDPProtocol, port, 403, "unsupported"},
		{"on", on, host, portmux.ReverseProtocol, port, 101, ""},
		{"opt-in, not annotated", PortForwardModes{Reverse: ModeOptIn, AllowHostNetwork: true}, host, portmux.ReverseProtocol, port, 403, ReverseAnnotation},
		{"opt-in, annotated", PortForwardModes{Reverse: ModeOptIn, AllowHostNetwork: true}, annotated, portmux.ReverseProtocol, port, 101, ""},
		{"host network not allowed", PortForwardModes{Reverse: ModeOn}, host, portmux.ReverseProtocol, port, 403, "node's network"},
		{"udp on a host-network pod not allowed", PortForwardModes{UDP: ModeOn}, host, portmux.UDPProtocol, "53", 403, "node's network"},
		{"privileged port", on, host, portmux.ReverseProtocol, "80", 403, "privileged"},
		{"too many ports", on, host, portmux.ReverseProtocol, "2001,2002,2003,2004", 400, "at most 3"},
		{"2,000 ports", on, host, portmux.ReverseProtocol, manyPorts(2000), 400, "at most 3"},
		{"a port twice", on, host, portmux.ReverseProtocol, port + "," + port, 400, "twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, srv, _ := modesServer(t, c.modes, c.sb)
			ws, code, body := dialMode(t, srv.URL, c.proto, c.ports)
			if code != c.code || !strings.Contains(body, c.says) {
				t.Fatalf("got %d %q, want %d saying %q", code, body, c.code, c.says)
			}
			deadline := time.Now().Add(10 * time.Second)
			if ws != nil { // the session's end closes its listener
				ws.Close()
			} else {
				deadline = time.Now() // a refusal bound nothing
			}
			for {
				l, err := net.Listen("tcp", "127.0.0.1:"+port)
				if err == nil {
					l.Close()
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("port %s still bound: %v", port, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// A namespace found by the sandbox's PID is used only if the sandbox
// still has that process once the namespace is open.
func TestModesRecheckAPIDNamespace(t *testing.T) {
	pid := os.Getpid()
	self := fmt.Sprintf("/proc/%d/ns/net", pid)
	m := PortForwardModes{UDP: ModeOn}
	_, srv, _ := modesServer(t, m, cri.Sandbox{NetNS: self, PID: pid}, cri.Sandbox{NetNS: "/proc/4242/ns/net", PID: 4242})
	ws, code, body := dialMode(t, srv.URL, portmux.UDPProtocol, "53")
	if ws != nil {
		ws.Close()
	}
	if code != http.StatusConflict || !strings.Contains(body, "changed") {
		t.Fatalf("a PID that changed under the open: %d %q, want 409", code, body)
	}
	_, srv, _ = modesServer(t, m, cri.Sandbox{NetNS: self, PID: pid})
	if ws, code, body = dialMode(t, srv.URL, portmux.UDPProtocol, "53"); ws == nil {
		t.Fatalf("the same PID after the open: %d %q, want 101", code, body)
	}
	ws.Close()
}

// Sessions on one pod share one check loop: the runtime is asked once a
// period, not once a session a period.
func TestOnePodWatchPerSandbox(t *testing.T) {
	fs := &fakeSandboxes{}
	p := &podWatches{sandboxes: fs, period: 10 * time.Millisecond}
	var unwatch []func()
	for range 20 {
		_, cancel := context.WithCancelCause(context.Background())
		unwatch = append(unwatch, p.watch("sb", "default/demo", cancel))
	}
	time.Sleep(200 * time.Millisecond)
	for _, u := range unwatch {
		u()
	}
	// 20 periods passed: one loop asks about 20 times; one a session, 400.
	if n := fs.checks.Load(); n == 0 || n > 40 {
		t.Fatalf("%d checks in 20 periods for 20 sessions on one pod", n)
	}
	if len(p.bySandbox) != 0 {
		t.Fatal("the loop outlived its sessions")
	}
}

// Once Shutdown began no request is admitted: 503, and nothing counted
// for Shutdown to wait for.
func TestNoSessionAfterShutdown(t *testing.T) {
	s, srv, _ := modesServer(t, PortForwardModes{Reverse: ModeOn, AllowHostNetwork: true}, cri.Sandbox{HostNetwork: true})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ws, code, _ := dialMode(t, srv.URL, portmux.ReverseProtocol, freePort(t))
	if ws != nil {
		ws.Close()
	}
	if code != http.StatusServiceUnavailable {
		t.Fatalf("a request after Shutdown: %d, want 503", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("a second Shutdown waits for something: %v", err)
	}
}
