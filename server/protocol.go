// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

// This file is the classifier: what a streaming request's upgrade headers
// ask for, and so what kubestream will do with it, decided from headers
// alone. It answers nothing and counts nothing (admit.go does).

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/kubestream/kubestream/portmux"
)

// Route is what kubestream does with a streaming request.
type Route string

const (
	RouteTranslated       Route = "translated"        // v5 WebSocket → SPDY v4
	RouteTunneled         Route = "tunneled"          // SPDY-over-WebSocket port-forward
	RouteDirect           Route = "direct"            // WebSocket proxied to a runtime that speaks it
	RouteProxiedSPDY      Route = "proxied-spdy"      // SPDY passed through unchanged
	RouteProxiedWebSocket Route = "proxied-websocket" // legacy WebSocket passed through unchanged
	RouteRejected         Route = "rejected"
	// kubestream's own port-forward modes (portmux), served by the node.
	RouteReverse Route = "reverse-portforward"
	RouteUDP     Route = "udp-portforward"
)

// Subresources of the kubelet API that stream.
const (
	Exec        = "exec"
	Attach      = "attach"
	PortForward = "portforward"
)

var (
	// What a runtime's streaming server accepts (cri-streaming, containerd),
	// hence what can be passed through unchanged.
	legacyWebSocketRC = []string{"", remotecommand.StreamProtocolV4Name, "v4.base64.channel.k8s.io",
		"channel.k8s.io", "base64.channel.k8s.io"}
	legacyWebSocketPF = []string{"", remotecommand.StreamProtocolV4Name, "v4.base64.channel.k8s.io"}
	spdyRC            = []string{remotecommand.StreamProtocolV4Name, remotecommand.StreamProtocolV3Name,
		remotecommand.StreamProtocolV2Name, remotecommand.StreamProtocolV1Name}
	spdyPF = []string{portforward.PortForwardV1Name}
)

// decision is the outcome of looking at a request's upgrade headers.
type decision struct {
	route    Route
	protocol string // the protocol that decided it ("" for legacy unnamed)
	// for rejections
	status   int
	message  string
	accepted []string
	// directCandidate: offer the client's WebSocket to the runtime first.
	directCandidate bool
	// notUpgrade: rejected as no upgrade at all, which the kubelet only
	// says of a request whose parameters and pod are good.
	notUpgrade bool
}

// servedModes are kubestream's own port-forward modes the node serves
// (portmux's reverse and UDP), to some pods at least.
type servedModes struct{ reverse, udp bool }

// classify decides from headers alone, before any CRI call, so a request
// kubestream cannot serve never costs the runtime anything.
func classify(req *http.Request, subresource string, webSockets bool, modes servedModes) decision {
	if !httpstream.IsUpgradeRequest(req) {
		return decision{route: RouteRejected, status: http.StatusBadRequest, notUpgrade: true,
			message: "Upgrade request required: " + subresource + " streams over a WebSocket or SPDY/3.1 upgrade"}
	}
	upgrade := strings.ToLower(req.Header.Get(httpstream.HeaderUpgrade))
	switch {
	case strings.Contains(upgrade, "websocket"):
		return classifyWebSocket(req, subresource, webSockets, modes)
	case strings.Contains(upgrade, "spdy/3.1"):
		return classifySPDY(req, subresource)
	}
	return decision{route: RouteRejected, status: http.StatusBadRequest,
		message: "unsupported upgrade " + req.Header.Get(httpstream.HeaderUpgrade) + "; want websocket or SPDY/3.1"}
}

func classifyWebSocket(req *http.Request, subresource string, webSockets bool, modes servedModes) decision {
	if msg := handshakeFault(req); msg != "" {
		// Refused before the CRI call: a runtime URL is single-use and
		// runtimes hold at most 1,000, so a malformed handshake must not
		// spend one (1,000 such requests emptied a runtime's cache and
		// every exec on the node got 503 for a minute).
		return decision{route: RouteRejected, status: http.StatusBadRequest, message: "bad WebSocket handshake: " + msg}
	}
	offered := headerList(req.Header, "Sec-WebSocket-Protocol")
	native, legacy := remotecommand.StreamProtocolV5Name, legacyWebSocketRC
	nativeRoute := RouteTranslated
	if subresource == PortForward {
		native, legacy = portforward.WebsocketsSPDYTunnelingPortForwardV1, legacyWebSocketPF
		nativeRoute = RouteTunneled
	}
	if subresource != PortForward {
		modes = servedModes{}
	}
	// Chosen by subprotocol alone: the apiserver passes these upgrades
	// through unchanged and keeps only the port query.
	for _, p := range offered {
		switch {
		case p == portmux.ReverseProtocol && modes.reverse:
			return decision{route: RouteReverse, protocol: p}
		case p == portmux.UDPProtocol && modes.udp:
			return decision{route: RouteUDP, protocol: p}
		}
	}
	if webSockets && slices.Contains(offered, native) {
		return decision{route: nativeRoute, protocol: native}
	}
	if len(offered) == 0 {
		return decision{route: RouteProxiedWebSocket}
	}
	for _, p := range offered {
		if slices.Contains(legacy, p) {
			return decision{route: RouteProxiedWebSocket, protocol: p}
		}
	}
	if !webSockets && slices.Contains(offered, native) {
		// A kubelet without ExtendWebSocketsToKubelet passes the request to
		// the runtime, whose refusal (403) sends clients to their SPDY
		// fallback. Behave exactly like it.
		return decision{route: RouteProxiedWebSocket, protocol: native}
	}
	accepted := legacy[1:]
	if webSockets {
		accepted = append([]string{native}, accepted...)
	}
	if modes.reverse {
		accepted = append(slices.Clip(accepted), portmux.ReverseProtocol)
	}
	if modes.udp {
		accepted = append(slices.Clip(accepted), portmux.UDPProtocol)
	}
	return decision{route: RouteRejected, status: http.StatusForbidden, accepted: accepted,
		message: "unsupported WebSocket subprotocols " + strings.Join(offered, ", ")}
}

func classifySPDY(req *http.Request, subresource string) decision {
	offered := headerList(req.Header, httpstream.HeaderProtocolVersion)
	supported := spdyRC
	if subresource == PortForward {
		supported = spdyPF
	}
	if len(offered) == 0 {
		return decision{route: RouteRejected, status: http.StatusBadRequest, accepted: supported,
			message: "missing " + httpstream.HeaderProtocolVersion + " header"}
	}
	for _, p := range offered {
		if slices.Contains(supported, p) {
			return decision{route: RouteProxiedSPDY, protocol: p}
		}
	}
	return decision{route: RouteRejected, status: http.StatusForbidden, accepted: supported,
		message: "unsupported stream protocols " + strings.Join(offered, ", ")}
}

// handshakeFault checks a WebSocket upgrade as RFC 6455 §4.2.1 asks of a
// server ("" when it is well-formed), so that every route, the direct offer
// included, gets a handshake that gorilla (or the runtime) will accept.
func handshakeFault(req *http.Request) string {
	switch {
	case req.Method != http.MethodGet:
		return "method " + req.Method + ", want GET"
	case !websocket.IsWebSocketUpgrade(req):
		return "Connection must include Upgrade and Upgrade must be websocket"
	case req.Header.Get("Sec-WebSocket-Version") != "13":
		return "Sec-WebSocket-Version must be 13"
	}
	k, err := base64.StdEncoding.DecodeString(req.Header.Get("Sec-WebSocket-Key"))
	if err != nil || len(k) != 16 {
		return "Sec-WebSocket-Key must be 16 bytes in base64"
	}
	return ""
}

// headerList splits comma-separated and repeated header values.
func headerList(h http.Header, key string) []string {
	var out []string
	for _, v := range h.Values(key) {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
