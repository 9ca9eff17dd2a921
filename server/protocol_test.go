// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"testing"
)

func TestClassify(t *testing.T) {
	ws := func(p string) http.Header {
		h := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"},
			"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
		if p != "" {
			h.Set("Sec-WebSocket-Protocol", p)
		}
		return h
	}
	spdy := func(p ...string) http.Header {
		return http.Header{"Connection": {"Upgrade"}, "Upgrade": {"SPDY/3.1"}, "X-Stream-Protocol-Version": p}
	}
	cases := []struct {
		name   string
		sub    string
		hdr    http.Header
		gate   bool
		route  Route
		status int
	}{
		{"v5", Exec, ws("v5.channel.k8s.io"), true, RouteTranslated, 0},
		{"v5 preferred over v4", Attach, ws("v4.channel.k8s.io, v5.channel.k8s.io"), true, RouteTranslated, 0},
		{"v5 with the gate off is passed on", Exec, ws("v5.channel.k8s.io"), false, RouteProxiedWebSocket, 0},
		{"legacy v4", Exec, ws("v4.channel.k8s.io"), true, RouteProxiedWebSocket, 0},
		{"legacy base64", Exec, ws("base64.channel.k8s.io"), true, RouteProxiedWebSocket, 0},
		{"no subprotocol is legacy channel.k8s.io", Exec, ws(""), true, RouteProxiedWebSocket, 0},
		{"unknown subprotocol", Exec, ws("bogus"), true, RouteRejected, 403},
		{"tunnel", PortForward, ws("SPDY/3.1+portforward.k8s.io"), true, RouteTunneled, 0},
		{"tunnel with the gate off is passed on", PortForward, ws("SPDY/3.1+portforward.k8s.io"), false, RouteProxiedWebSocket, 0},
		{"legacy port-forward websocket", PortForward, ws("v4.channel.k8s.io"), true, RouteProxiedWebSocket, 0},
		{"remotecommand protocol on port-forward", PortForward, ws("v5.channel.k8s.io"), true, RouteRejected, 403},
		{"reverse", PortForward, ws("v1.reverse.portforward.kubestream.io"), true, RouteReverse, 0},
		{"udp", PortForward, ws("v1.udp.portforward.kubestream.io"), true, RouteUDP, 0},
		{"reverse on exec", Exec, ws("v1.reverse.portforward.kubestream.io"), true, RouteRejected, 403},
		{"reverse where the node cannot serve it", PortForward, ws("v1.reverse.portforward.kubestream.io"), false, RouteRejected, 403},
		{"udp with only reverse on", PortForward, ws("v1.udp.portforward.kubestream.io"), false, RouteRejected, 403},
		{"spdy v4", Exec, spdy("v4.channel.k8s.io"), true, RouteProxiedSPDY, 0},
		{"spdy list from the apiserver", Exec, spdy("v5.channel.k8s.io, v4.channel.k8s.io, v3.channel.k8s.io"), true, RouteProxiedSPDY, 0},
		{"spdy v5 only", Exec, spdy("v5.channel.k8s.io"), true, RouteRejected, 403},
		{"spdy without versions", Exec, spdy(), true, RouteRejected, 400},
		{"spdy port-forward", PortForward, spdy("portforward.k8s.io"), true, RouteProxiedSPDY, 0},
		{"not an upgrade", Exec, http.Header{}, true, RouteRejected, 400},
		{"websocket without a key", Exec, without(ws("v5.channel.k8s.io"), "Sec-Websocket-Key"), true, RouteRejected, 400},
		{"websocket with a short key", Exec, with(ws("v5.channel.k8s.io"), "Sec-Websocket-Key", "c2hvcnQ="), true, RouteRejected, 400},
		{"websocket version 8", Exec, with(ws("v5.channel.k8s.io"), "Sec-Websocket-Version", "8"), true, RouteRejected, 400},
		{"legacy websocket without a key", Exec, without(ws("v4.channel.k8s.io"), "Sec-Websocket-Key"), true, RouteRejected, 400},
		{"tunnel without a version", PortForward, without(ws("SPDY/3.1+portforward.k8s.io"), "Sec-Websocket-Version"), true, RouteRejected, 400},
		{"websocket gate off without a key", Exec, without(ws("v5.channel.k8s.io"), "Sec-Websocket-Key"), false, RouteRejected, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "/x", nil)
			if tc.hdr.Get("Upgrade") == "SPDY/3.1" {
				req.Method = http.MethodPost
			}
			req.Header = tc.hdr
			modes := servedModes{tc.gate, tc.gate}
			if tc.name == "udp with only reverse on" {
				tc.gate, modes = true, servedModes{reverse: true}
			}
			d := classify(req, tc.sub, tc.gate, modes)
			if d.route != tc.route || d.status != tc.status {
				t.Fatalf("got %s/%d (%s), want %s/%d", d.route, d.status, d.message, tc.route, tc.status)
			}
		})
	}
}

func with(h http.Header, k, v string) http.Header { h.Set(k, v); return h }
func without(h http.Header, k string) http.Header { h.Del(k); return h }
