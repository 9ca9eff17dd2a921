// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubestream/kubestream/internal/connreset"
	"github.com/kubestream/kubestream/internal/wiretest"
)

// forward starts client-go's port forwarder (protocol "websocket": its
// tunneling dialer, served natively; "spdy": its SPDY dialer, served by
// cri-streaming) on the pod's ports, and returns the local ports in the
// same order, a stop, and ForwardPorts' end.
func forward(t *testing.T, ts *testServer, protocol string, remote ...int32) ([]uint16, func(), <-chan error) {
	t.Helper()
	resp, err := ts.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "p1", Port: remote})
	if err != nil {
		t.Fatal(err)
	}
	u := mustParse(resp.Url)
	cfg := &rest.Config{Host: "http://unused"}
	d, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if protocol == "spdy" {
		transport, upgrader, rerr := spdy.RoundTripperFor(cfg)
		if rerr != nil {
			t.Fatal(rerr)
		}
		d, err = spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u), nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var specs []string
	for _, p := range remote {
		specs = append(specs, fmt.Sprintf("0:%d", p))
	}
	stopc, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(d, []string{"127.0.0.1"}, specs, stopc, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("%s: %v", protocol, err)
	}
	fps, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	local := make([]uint16, len(fps))
	for i, p := range fps {
		local[i] = p.Local
	}
	var stopped bool
	stop := func() {
		if !stopped {
			stopped = true
			close(stopc)
		}
	}
	t.Cleanup(stop)
	return local, stop, errc
}

// TestPodResetEndsOneConnection: a connection the pod resets ends alone,
// on the tunnel served here and on SPDY served by cri-streaming: the local
// client sees its connection end at once, the forward goes on (more
// connections on the same port and another are answered), nothing is
// written on the error stream (client-go would end the whole forward on
// it), and the reset is counted by reason. Before, client-go ended the
// forward on the runtime's "connection reset by peer".
func TestPodResetEndsOneConnection(t *testing.T) {
	ts := start(t, nil)
	for i, protocol := range []string{"websocket", "spdy"} {
		t.Run(protocol, func(t *testing.T) {
			ports, stop, errc := forward(t, ts, protocol, 4, 80)
			start := time.Now()
			if got, err := wiretest.LineThrough(ports[0], wiretest.ResetLine); err == nil || got != "" {
				t.Fatalf("a connection the pod reset read %q, %v; want its end", got, err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("the reset connection ended after %v", took)
			}
			t.Logf("the reset connection ended after %v", time.Since(start))
			for j := range 3 {
				for _, p := range ports {
					msg := fmt.Sprintf("hello %d\n", j)
					if got, err := wiretest.LineThrough(p, msg); err != nil || got != msg {
						t.Fatalf("connection %d to local port %d after the reset: %q, %v", j, p, got, err)
					}
				}
			}
			select {
			case err := <-errc:
				t.Fatalf("the forward ended after one connection was reset: %v", err)
			default:
			}
			if got := testutil.ToFloat64(ts.m.resets.WithLabelValues(connreset.Reset)); got != float64(i+1) {
				t.Errorf("%v resets counted after %d", got, i+1)
			}
			stop()
			<-errc
		})
	}
}

// TestFailureToConnectReported: nothing listening is no reset: it is not
// counted as one, and on the tunnel served here it is still said on the
// error stream, so client-go ends the forward, as it should (the user
// learns that nothing listens). On SPDY cri-streaming reports it itself:
// the adapter passes the runtime's error on unchanged.
func TestFailureToConnectReported(t *testing.T) {
	ts := start(t, nil)
	for _, protocol := range []string{"websocket", "spdy"} {
		ports, _, errc := forward(t, ts, protocol, 1)
		if got, err := wiretest.LineThrough(ports[0], "hello\n"); err == nil {
			t.Fatalf("%s: a refused connection read %q", protocol, got)
		}
		if protocol == "websocket" {
			select {
			case err := <-errc:
				// client-go logs the runtime's words and returns its own.
				if err == nil {
					t.Fatalf("%s: the forward ended with no error", protocol)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the forward went on after a failure to connect", protocol)
			}
		}
		if n := testutil.CollectAndCount(ts.m.resets); n != 0 {
			t.Fatalf("%s: a failure to connect counted as %d resets", protocol, n)
		}
	}
}

// TestStopEndsProcesses: Stop returns only once every session's runtime
// call has returned, its process killed, natively served or not; the
// client still hears that the server is shutting down. Before, Stop
// returned at once and the runtime (containerd, exiting right after) left
// the process running in the container.
func TestStopEndsProcesses(t *testing.T) {
	for _, protocol := range []string{"v5", "spdy"} {
		t.Run(protocol, func(t *testing.T) {
			ts := start(t, nil)
			done := make(chan result, 1)
			pr, pw := io.Pipe()
			defer pw.Close()
			u := ts.execURL(t, false, true, true, "sleep-kill")
			go func() { done <- run(t, protocol, u, pr, false, nil) }()
			waitRunning(t, ts)
			start := time.Now()
			_ = ts.Stop()
			took := time.Since(start)
			ts.rt.mu.Lock()
			killed := ts.rt.killed
			ts.rt.mu.Unlock()
			if killed != 1 {
				t.Fatalf("Stop returned after %v with %d processes killed; want 1", took, killed)
			}
			if took > StopTimeout {
				t.Fatalf("Stop took %v", took)
			}
			if protocol == "spdy" {
				// cri-streaming's SPDY session ends when the runtime
				// that stopped exits, its connections with it.
				ts.exit()
			}
			select {
			case r := <-done:
				if r.err == nil {
					t.Fatalf("the session ended as a success")
				}
				if protocol == "v5" && !strings.Contains(r.err.Error(), "streaming server shutting down") {
					t.Fatalf("session ended with %v; want the shutdown status", r.err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the session outlived Stop")
			}
		})
	}
}

// waitRunning waits until the session's process runs, then checks that its
// runtime call is counted once: Stop waits for that count to fall to 0.
func waitRunning(t *testing.T, ts *testServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ts.rt.mu.Lock()
		running := ts.rt.running
		ts.rt.mu.Unlock()
		if running == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d processes running, want 1", running)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s := ts.Server.(*runtimeServer)
	s.calls.mu.Lock()
	got := s.calls.n
	s.calls.mu.Unlock()
	if got != 1 {
		t.Fatalf("%d runtime calls in flight for one session, want 1", got)
	}
}
