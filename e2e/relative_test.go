// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"testing"
	"time"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
)

// withRelativeURLs gives the node an embedded reference runtime of its own
// whose streaming URLs carry no scheme, //127.0.0.1:port/cri/exec/…, as
// cri-dockerd's do (kubelet 1.36 dialled those as https: cri-dockerd#569).
func withRelativeURLs(webSockets bool) nodeOption {
	return func(o *app.ServeOptions) {
		o.ContainerRuntimeEndpoint = ""
		o.ReferenceRelativeURLs = true
		o.ReferenceWebSockets = webSockets
	}
}

// TestRelativeStreamingURLs: every route reaches a runtime whose URLs are
// scheme-relative, as the kubelet's pass-through always did (plain http to
// the address the runtime named).
func TestRelativeStreamingURLs(t *testing.T) {
	n := startNode(t, withRelativeURLs(false))
	t.Run("translated", func(t *testing.T) {
		r := n.exec("websocket", nil, "sh", "-c", "echo relative; exit 4")
		assertExit(t, r.err, 4)
		if r.stdout != "relative\n" || n.requests("exec", "translated") != 1 {
			t.Fatalf("stdout %q, translated %v", r.stdout, n.requests("exec", "translated"))
		}
	})
	t.Run("proxied-spdy", func(t *testing.T) {
		r := n.exec("spdy", nil, "echo", "spdy")
		assertExit(t, r.err, 0)
		if r.stdout != "spdy\n" || n.requests("exec", "proxied-spdy") != 1 {
			t.Fatalf("stdout %q, proxied-spdy %v", r.stdout, n.requests("exec", "proxied-spdy"))
		}
	})
	t.Run("proxied-websocket", func(t *testing.T) {
		c := n.legacyDial(t, "/exec/default/demo/app?command=true&output=1", "v4.channel.k8s.io")
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				break
			}
		}
		if n.requests("exec", "proxied-websocket") != 1 || n.failures("exec") != 0 {
			t.Fatalf("proxied-websocket %v, failures %v", n.requests("exec", "proxied-websocket"), n.failures("exec"))
		}
	})
	t.Run("tunneled", func(t *testing.T) {
		local, stop := openForward(t, n, "websocket", "demo", tcpEcho(t))
		defer stop()
		if err := echoCheck(local[0], []byte("through a relative URL")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("direct", func(t *testing.T) {
		d := startNode(t, withRelativeURLs(true))
		r := d.exec("websocket", nil, "echo", "direct")
		assertExit(t, r.err, 0)
		if r.stdout != "direct\n" || d.requests("exec", "direct") != 1 {
			t.Fatalf("stdout %q, direct %v", r.stdout, d.requests("exec", "direct"))
		}
		local, stop := openForward(t, d, "websocket", "demo", tcpEcho(t))
		err := echoCheck(local[0], []byte("direct tunnel"))
		stop()
		if err != nil || d.requests("portforward", "direct") != 1 {
			t.Fatalf("%v; direct port-forwards %v", err, d.requests("portforward", "direct"))
		}
		d.waitIdle(10 * time.Second)
	})
	n.waitIdle(10 * time.Second)
}

func (n *node) failures(sub string) float64 {
	return n.metricSum("kubestream_streaming_failures_total", map[string]string{"subresource": sub})
}
