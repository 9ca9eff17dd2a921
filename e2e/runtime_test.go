// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubestream/kubestream/cri"
)

// TestRuntimeRefusesV5 records why kubestream must translate: the runtime's
// own streaming server (cri-streaming, containerd) refuses v5 and the
// tunnel with 403, and its URLs are single-use. Through kubestream the same
// client gets 101, and every session runs on a fresh CRI URL.
func TestRuntimeRefusesV5(t *testing.T) {
	n := startNode(t)
	c, err := cri.Dial(context.Background(), n.run.Endpoint, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lookup := cri.RuntimeLookup{C: c}
	ctx := context.Background()
	id, err := lookup.ContainerID(ctx, cri.PodRef{Namespace: "default", Name: "demo"}, "app")
	if err != nil {
		t.Fatal(err)
	}
	execURL := func() *url.URL {
		u, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"echo", "direct"}, Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	dialWS := func(u *url.URL, protocol string) int {
		ws := *u
		ws.Scheme = strings.Replace(ws.Scheme, "http", "ws", 1)
		conn, resp, err := (&websocket.Dialer{Subprotocols: []string{protocol}}).Dial(ws.String(), nil)
		if err == nil {
			conn.Close()
			return http.StatusSwitchingProtocols
		}
		if resp == nil {
			t.Fatalf("dialing runtime: %v", err)
		}
		return resp.StatusCode
	}

	u := execURL()
	if got := dialWS(u, "v5.channel.k8s.io"); got != http.StatusForbidden {
		t.Fatalf("runtime answered v5 with %d; this suite expects runtimes to refuse it with 403", got)
	}
	// The refusal consumed the token: the URL is single-use.
	if got := dialWS(u, "v4.channel.k8s.io"); got != http.StatusNotFound {
		t.Fatalf("reusing a consumed URL got %d, want 404", got)
	}
	pf, err := c.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: mustSandbox(t, lookup, "demo")})
	if err != nil {
		t.Fatal(err)
	}
	if got := dialWS(pf, "SPDY/3.1+portforward.k8s.io"); got != http.StatusForbidden {
		t.Fatalf("runtime answered the tunnel with %d, want 403", got)
	}
	t.Logf("%s refuses v5 and the port-forward tunnel with 403: kubestream translates", rt.name)

	// Through kubestream: 101 and translation, session after session, each
	// on a fresh URL (a reused one would have been refused with 404).
	for i := 0; i < 3; i++ {
		exec, err := remotecommand.NewWebSocketExecutor(n.restConfig(), http.MethodGet,
			n.execURL("exec", "demo", "app", false, false, "echo", "via kubestream"))
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out}); err != nil || out.String() != "via kubestream\n" {
			t.Fatalf("session %d: %q %v", i, out.String(), err)
		}
	}
	if got := n.requests("exec", "translated"); got != 3 {
		t.Fatalf("translated %v sessions, want 3", got)
	}
	n.waitIdle(10 * time.Second)
}

func mustSandbox(t *testing.T, l cri.RuntimeLookup, pod string) string {
	t.Helper()
	id, err := l.SandboxID(context.Background(), cri.PodRef{Namespace: "default", Name: pod})
	if err != nil {
		t.Fatal(err)
	}
	return id
}
