// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kubestream/kubestream/cri"
)

// FuzzClassify: the protocol decision from a request's headers alone
// (untrusted: the apiserver relays the client's) never panics, and a
// rejection always carries a 4xx and a message.
func FuzzClassify(f *testing.F) {
	f.Add("GET", "websocket", "Upgrade", "v5.channel.k8s.io", "13", "dGhlIHNhbXBsZSBub25jZQ==", uint8(0), true)
	f.Add("GET", "websocket", "keep-alive, Upgrade", "SPDY/3.1+portforward.k8s.io", "13", "dGhlIHNhbXBsZSBub25jZQ==", uint8(2), true)
	f.Add("POST", "SPDY/3.1", "Upgrade", "v5.channel.k8s.io, v4.channel.k8s.io", "", "", uint8(0), true)
	f.Add("POST", "SPDY/3.1", "Upgrade", "portforward.k8s.io", "", "", uint8(2), false)
	f.Add("GET", "websocket", "Upgrade", "base64.channel.k8s.io,,", "8", "short", uint8(1), false)
	f.Fuzz(func(t *testing.T, method, upgrade, connection, protocols, version, key string, sub uint8, gate bool) {
		req, err := http.NewRequest(http.MethodGet, "/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Method = method
		req.Header.Set("Upgrade", upgrade)
		req.Header.Set("Connection", connection)
		req.Header.Set("Sec-WebSocket-Version", version)
		req.Header.Set("Sec-WebSocket-Key", key)
		req.Header.Set("Sec-WebSocket-Protocol", protocols)
		req.Header.Set("X-Stream-Protocol-Version", protocols)
		subresource := []string{Exec, Attach, PortForward}[int(sub)%3]
		d := classify(req, subresource, gate, servedModes{gate, gate})
		if d.route == RouteRejected && (d.status < 400 || d.status > 499 || d.message == "") {
			t.Fatalf("rejection without a 4xx and a reason: %+v", d)
		}
		if d.route != RouteRejected && d.status != 0 {
			t.Fatalf("route %s with status %d", d.route, d.status)
		}
		if (d.route == RouteTranslated || d.route == RouteTunneled) && !strings.Contains(protocols, d.protocol) {
			t.Fatalf("route %s for protocol %q the client did not offer (%q)", d.route, d.protocol, protocols)
		}
	})
}

// FuzzCheckNames: names from the request path are refused or accepted
// without panicking, and only valid UTF-8 ever reaches CRI.
func FuzzCheckNames(f *testing.F) {
	f.Add("default", "demo", "app", "")
	f.Add("default", "\xff", "app", "uid-1")
	f.Add("kube-system", "coredns-5d78c9869d-abcde", "coredns", "0b3f0c6e-1d2c-4b5e-9f3a-0c1d2e3f4a5b")
	f.Fuzz(func(t *testing.T, ns, pod, container, uid string) {
		ref := cri.PodRef{Namespace: ns, Name: pod, UID: uid}
		if checkNames(ref, container, true) == nil {
			for _, s := range []string{ns, pod, container, uid} {
				if !utf8.ValidString(s) {
					t.Fatalf("accepted a name that is not UTF-8: %q", s)
				}
			}
		}
	})
}
