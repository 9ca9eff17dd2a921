// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/translator"
)

// The openers: each readies a session's runtime side for its route, or
// answers the client with the error it met and returns false. A runtime
// that must be dialled is dialled before the client is answered, so that
// its refusal is still an HTTP answer.

// openTranslated readies a v5 session's runtime side: the translation
// dials the runtime's SPDY itself (runtimeDialer).
func (s *Server) openTranslated(q request, u *url.URL) legs {
	return translatedLegs{dialer: &runtimeDialer{s: s, q: q, next: u}, streams: q.streams}
}

// runtimeDialer dials the runtime's SPDY for a translation: the URL the
// request was given first, a fresh one for any later dial (a URL is
// single-use).
type runtimeDialer struct {
	s    *Server
	q    request
	next *url.URL // the URL not used yet; nil once it was
}

func (d *runtimeDialer) dial(ctx context.Context, protocols []string) (net.Conn, string, error) {
	u := d.next
	d.next = nil
	if u == nil {
		var err error
		if u, err = d.q.runtimeURL(ctx, d.s.cfg.URLs); err != nil {
			return nil, "", err
		}
	}
	return upgrade.SPDY(ctx, u, d.s.cfg.RuntimeTLS, protocols)
}

// openTunnel dials the runtime's SPDY port-forward before the client is
// answered: the tunnel has no status channel, so a runtime failure must
// still be an HTTP answer.
func (s *Server) openTunnel(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL) (legs, bool) {
	dctx, cancel := context.WithTimeout(r.Context(), s.cfg.Translator.StreamCreationTimeout)
	rt, proto, err := upgrade.SPDY(dctx, u, s.cfg.RuntimeTLS, []string{portforward.PortForwardV1Name})
	cancel()
	if err != nil {
		ss.refuse(w, r, upgradeStatus(err), err)
		return nil, false
	}
	if proto != portforward.PortForwardV1Name {
		rt.Close() // done with it: a failed close changes nothing
		ss.refuse(w, r, http.StatusBadGateway, fmt.Errorf("container runtime negotiated %q for port-forward", proto))
		return nil, false
	}
	return tunnelLegs{runtime: rt}, true
}

// openRelaySPDY passes a SPDY upgrade to the runtime with the client's
// protocol list, as a kubelet does; the node still follows the session
// (translator.RelaySPDY), because a byte copy loses output when the
// runtime closes with the client's pings unread.
func (s *Server) openRelaySPDY(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL) (legs, bool) {
	dctx, cancel := context.WithTimeout(r.Context(), s.cfg.Translator.StreamCreationTimeout)
	rt, proto, err := upgrade.SPDY(dctx, u, s.cfg.RuntimeTLS, r.Header.Values(httpstream.HeaderProtocolVersion))
	cancel()
	if err != nil {
		refusePassThrough(w, r, ss, err)
		return nil, false
	}
	return takenOver{via: RouteProxiedSPDY, runtime: rt, proto: proto, reply: http.Header{httpstream.HeaderConnection: {httpstream.HeaderUpgrade},
		httpstream.HeaderUpgrade: {"SPDY/3.1"}, httpstream.HeaderProtocolVersion: {proto}}}, true
}

// openRelayWebSocket passes a legacy WebSocket (v4.channel.k8s.io and
// older, or v5 with the gate off) to the runtime with the client's own
// handshake: the runtime's answer, 101 or a refusal, reaches the client
// as it was (translator.Splice carries it after).
func (s *Server) openRelayWebSocket(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL) (legs, bool) {
	key := r.Header.Get("Sec-WebSocket-Key")
	dctx, cancel := context.WithTimeout(r.Context(), s.cfg.Translator.StreamCreationTimeout)
	rt, proto, err := upgrade.WebSocketOffer(dctx, u, s.cfg.RuntimeTLS, key, headerList(r.Header, "Sec-WebSocket-Protocol"))
	cancel()
	if err != nil {
		refusePassThrough(w, r, ss, err)
		return nil, false
	}
	return takenOver{via: RouteProxiedWebSocket, runtime: rt, proto: proto, reply: upgrade.WebSocketAnswer(key, proto)}, true
}

// refusePassThrough answers a pass-through whose runtime dial failed: the
// runtime's own refusal goes back as it was, as a byte-for-byte proxy
// would have passed it; an unreachable runtime is a bad gateway.
func refusePassThrough(w http.ResponseWriter, r *http.Request, ss *session, err error) {
	var ue *upgrade.Error
	if errors.As(err, &ue) {
		ss.refuse(w, r, ue.StatusCode, errors.New(strings.TrimSpace(ue.Body)))
		return
	}
	ss.refuse(w, r, upgradeStatus(err), err)
}

// legs are a session's runtime side, ready, one plain value per route;
// the runner (run) takes the client's side over and answers it. The route
// a session runs is its legs' (the runner sets it once from them).
type legs interface{ route() Route }

// translatedLegs: a way to dial the runtime's SPDY (the translation dials
// it itself) and the streams the client asked for.
type translatedLegs struct {
	dialer  *runtimeDialer
	streams translator.Options
}

// tunnelLegs: the runtime's SPDY port-forward connection.
type tunnelLegs struct {
	runtime net.Conn
}

// takenOver: the runtime's connection, upgraded with proto, for a route
// whose client connection is taken over as it is (direct, proxied-spdy,
// proxied-websocket), and the headers of the 101 it gets.
type takenOver struct {
	via     Route
	runtime net.Conn
	proto   string
	reply   http.Header
}

func (translatedLegs) route() Route { return RouteTranslated }
func (tunnelLegs) route() Route     { return RouteTunneled }
func (t takenOver) route() Route    { return t.via }

// upgradeStatus maps a failed runtime dial to the client's status: the
// runtime's own 4xx passes on; an unreachable runtime is a bad gateway.
func upgradeStatus(err error) int {
	var ue *upgrade.Error
	if errors.As(err, &ue) && ue.StatusCode >= 400 && ue.StatusCode < 500 {
		return ue.StatusCode
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}
