// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kind

package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	pfapp "github.com/kubestream/kubestream/cmd/kubectl-kubestream/app"
	"github.com/kubestream/kubestream/frontdoor"
	"github.com/kubestream/kubestream/portmux"
)

// What a user with only create pods/portforward could do to a node
// through kubestream's own modes, tried through the apiserver as such a
// user would: each is refused or bounded on the kubestream workers; stock
// does not serve the modes at all.
var (
	faultModesFlood = faultCase{"UDP port-forward: 300,000 refused association opens from a client that never reads: the node's goroutines and RSS", kubestreamWorkers}
	faultModesPorts = faultCase{"reverse port-forward asking for 2,000 ports: refused, nothing bound", kubestreamWorkers}
	faultModesGuard = faultCase{"reverse port-forward to a pod's port 80 (refused where the pod's own processes may not bind it), and to a host-network pod (refused)", kubestreamWorkers}
)

func faultModesAbuse(t *testing.T, cp *controlPlane, ft *faultTable, n kindNode, pod string) {
	var notServed *pfapp.NotServedError

	// The flood.
	ws, err := kindModeDial(t, cp, pod, portmux.UDPProtocol, 7000)
	switch {
	case errors.As(err, &notServed):
		ft.record(t, faultModesFlood, n.flavour, "not served", !kubestreamWorkers[n.flavour])
	case err != nil:
		ft.record(t, faultModesFlood, n.flavour, "dial: "+err.Error(), false)
	default:
		out, ok := modesFlood(t, cp, n, ws)
		ft.record(t, faultModesFlood, n.flavour, out, ok)
	}

	// 2,000 ports, then nothing listening in the pod.
	var many []int
	for p := 2001; p <= 4000; p++ {
		many = append(many, p)
	}
	ws, err = kindModeDial(t, cp, pod, portmux.ReverseProtocol, many...)
	if ws != nil {
		ws.Close()
	}
	listening := cp.kubectl(nil, "exec", pod, "-c", "app", "--", "netstat", "-ltn").stdout
	switch {
	case errors.As(err, &notServed):
		ft.record(t, faultModesPorts, n.flavour, "not served", !kubestreamWorkers[n.flavour])
	case err == nil:
		ft.record(t, faultModesPorts, n.flavour, "served", false)
	default:
		bound := strings.Contains(listening, "127.0.0.1:2001 ")
		ft.record(t, faultModesPorts, n.flavour, fmt.Sprintf("refused (%s), port 2001 bound: %v", quoteShort(err), bound),
			strings.Contains(err.Error(), "at most") && !bound)
	}

	// Port 80 in the pod, refused only where the pod's own processes may
	// not bind it (containerd's pods have net.ipv4.ip_unprivileged_port_start
	// 0 by default, so they may), and a host-network pod, always refused.
	start := strings.TrimSpace(cp.must(nil, "exec", pod, "-c", "app", "--", "cat", "/proc/sys/net/ipv4/ip_unprivileged_port_start"))
	var first int
	if n, err := fmt.Sscan(start, &first); n != 1 || err != nil {
		t.Fatalf("the pod's ip_unprivileged_port_start: %q", start)
	}
	privileged := first > 80
	hostPod := kindModesPod(t, cp, n.flavour, nil, true)
	says := []string{"pod's unprivileged port start " + start}
	ok := true
	for _, c := range []struct {
		pod, want string
		port      int
		refused   bool
	}{{pod, "privileged", 80, privileged}, {hostPod, "node's network", 18081, true}} {
		ws, err := kindModeDial(t, cp, c.pod, portmux.ReverseProtocol, c.port)
		if ws != nil {
			ws.Close()
		}
		switch {
		case errors.As(err, &notServed):
			says, ok = append(says, "not served"), ok && !kubestreamWorkers[n.flavour]
		case err == nil:
			says, ok = append(says, fmt.Sprintf("port %d served", c.port)), ok && !c.refused
		default:
			says = append(says, fmt.Sprintf("port %d refused (%s)", c.port, quoteShort(err)))
			ok = ok && c.refused && strings.Contains(err.Error(), c.want)
		}
	}
	ft.record(t, faultModesGuard, n.flavour, strings.Join(says, "; "), ok)
}

// modesFlood sends 300,000 association opens for a port the session does
// not forward, never reading, and reads the kubelet's goroutines and RSS
// before, right after, and 10 s after the session.
func modesFlood(t *testing.T, cp *controlPlane, n kindNode, ws *websocket.Conn) (string, bool) {
	metrics := func() (float64, float64) {
		// kubestream's own series, from the process that serves them
		// (the kubelet, or kubestream node on daemon).
		return nodeMetric(t, cp, n, frontdoor.OwnMetricsPath, "go_goroutines"), nodeMetric(t, cp, n, frontdoor.OwnMetricsPath, "process_resident_memory_bytes")
	}
	g0, rss0 := metrics()
	sent := 0
	done := make(chan struct{})
	go func() { // ends with the session or the last frame
		defer close(done)
		for id := uint32(1); id <= 300_000; id++ {
			_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if ws.WriteMessage(websocket.BinaryMessage, portmux.Frame{Type: portmux.TypeAssocOpen, ID: id, Port: 7}.Append(nil)) != nil {
				return
			}
			sent++
		}
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
	}
	g1, rss1 := metrics()
	ws.Close()
	<-done
	time.Sleep(10 * time.Second)
	g2, rss2 := metrics()
	const mib = 1 << 20
	// The node ends the session once 256 refusals wait unwritten: when the
	// network between it and the client (the apiserver's buffers, both
	// kernels') is full. A node that writes refusals as fast as they come
	// may pass all 300,000 into that network first; either way it must
	// hold nothing for them: goroutines and memory back where they were.
	ended := fmt.Sprintf("ended after %d", sent)
	if sent == 300_000 {
		ended = "all 300,000 refused and written (not ended)"
	}
	out := fmt.Sprintf("%s; goroutines %.0f → %.0f → %.0f, RSS %.0f → %.0f → %.0f MiB",
		ended, g0, g1, g2, rss0/mib, rss1/mib, rss2/mib)
	return out, g1-g0 < 200 && g2-g0 < 50 && rss1-rss0 < 64*mib
}

// quoteShort quotes the start of an error for a table cell.
func quoteShort(err error) string {
	s := err.Error()
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("%q", s)
}
