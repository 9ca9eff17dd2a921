// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubestream/kubestream/internal/wiretest"
)

// TestPortForwardPodReset: the pod resets one forwarded connection
// (SO_LINGER 0, wiretest.ServeResets); the local client sees that
// connection end at once, and the same port-forward answers three more
// connections. client-go ends a whole forward on any word on a
// connection's error stream, and every runtime writes one for a reset: on
// the SPDY runtime (the reference runtime's cri-streaming) kubestream
// keeps those words from the client on the tunneled and proxied-spdy
// routes; on the WebSocket runtime (cri/streaming) the runtime side writes
// none. Each mode with both of client-go's dialers.
func TestPortForwardPodReset(t *testing.T) {
	port, err := strconv.Atoi(strings.TrimPrefix(wiretest.ResetServer(t), "127.0.0.1:"))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []struct {
		name   string
		opts   []nodeOption
		routes map[string]string // by dialer: the route kubestream counts the reset on ("" for none: the runtime side resets)
	}{
		{"spdy-runtime", nil, map[string]string{"websocket": "tunneled", "spdy": "proxied-spdy"}},
		{"websocket-runtime", []nodeOption{withWebSocketRuntime()}, map[string]string{"websocket": "", "spdy": ""}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			if mode.opts == nil && rt.endpoint != "" {
				// A real runtime's route depends on what it speaks
				// (the patched containerd serves the tunnel itself);
				// the connections after the reset are the proof.
				mode.routes = map[string]string{}
			}
			n := startNode(t, mode.opts...)
			for _, dialer := range []string{"websocket", "spdy"} {
				t.Run(dialer, func(t *testing.T) {
					route := mode.routes[dialer]
					before := n.resets(route)
					local, stop := openForward(t, n, dialer, "demo", port)
					defer stop()
					start := time.Now()
					if got, err := wiretest.LineThrough(local[0], wiretest.ResetLine); err == nil || got != "" {
						t.Fatalf("a connection the pod reset read %q, %v; want its end", got, err)
					}
					t.Logf("the reset connection ended after %v", time.Since(start).Round(time.Millisecond))
					for i := range 3 {
						msg := fmt.Sprintf("after the reset %d\n", i)
						if got, err := wiretest.LineThrough(local[0], msg); err != nil || got != msg {
							t.Fatalf("connection %d after the reset: %q, %v (the forward ended with the reset)", i, got, err)
						}
					}
					if route != "" {
						if got := n.resets(route) - before; got != 1 {
							t.Errorf("%v resets counted on route %s, want 1", got, route)
						}
					}
				})
			}
		})
	}
}

// resets is kubestream's count of connections the pod reset on route.
func (n *node) resets(route string) float64 {
	return n.metricSum("kubestream_portforward_connections_reset_total", map[string]string{"route": route})
}
