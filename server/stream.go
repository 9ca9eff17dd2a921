// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"

	"github.com/gorilla/websocket"
	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/internal/wire"
	"github.com/kubestream/kubestream/translator"
)

// serveStream is the one path of every streaming request, exec, attach and
// port-forward alike, read top to bottom:
//
//  1. admit: the route from the upgrade headers alone (protocol.go), the
//     session limits (admit.go);
//  2. parse the request (request.go) and ask the runtime for its URL;
//  3. open the session's legs for the route (open.go): a WebSocket kubestream
//     would translate or tunnel is first offered to the runtime as it is
//     (direct.go);
//  4. run the session to its end and wrap it up (run, below).
//
// Every failure before the session runs is answered with an HTTP error by
// the step that met it; after that the session's own protocol says how it
// ended.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, sub string) {
	ss, route, ok := s.admit(w, r, sub)
	if !ok {
		return
	}
	defer ss.release()
	q, err := parseRequest(r, sub)
	if err != nil {
		ss.refuse(w, r, http.StatusBadRequest, err)
		return
	}
	q.describe(ss.ev)
	ctx := klog.NewContext(r.Context(), klog.FromContext(r.Context()).WithValues(q.logValues()...))
	r = r.WithContext(ctx)
	if route == RouteReverse || route == RouteUDP { // the node's own: no runtime URL
		if l, ok := s.openModes(w, r, ss, q, route); ok {
			s.run(w, r, ss, l)
		}
		return
	}
	u, err := q.runtimeURL(ctx, s.cfg.URLs)
	if err != nil {
		ss.refuse(w, r, cri.HTTPStatus(err), err)
		return
	}

	var l legs
	if route == RouteTranslated || route == RouteTunneled {
		if s.cfg.WebSocketRequested != nil {
			s.cfg.WebSocketRequested(sub)
		}
		// The runtime may take the WebSocket itself (l, the direct
		// route's legs); if it refused, u is a fresh URL.
		if l, u, ok = s.offerDirect(w, r, ss, q, u); !ok {
			return
		}
	}
	if l == nil {
		switch route {
		case RouteTranslated:
			l = s.openTranslated(q, u)
		case RouteTunneled:
			l, ok = s.openTunnel(w, r, ss, u)
		case RouteProxiedSPDY:
			l, ok = s.openRelaySPDY(w, r, ss, u)
		case RouteProxiedWebSocket:
			l, ok = s.openRelayWebSocket(w, r, ss, u)
		}
	}
	if ok {
		s.run(w, r, ss, l)
	}
}

// run owns a session whose runtime side is ready, whatever its route: it
// takes the client's connection over and answers it (the 101), carries the
// session to its end and wraps it up, tied to the server's life (Shutdown
// ends it), counted active and on the audit record from its start,
// recorded when due (a tty). A client it cannot answer is rejected through
// the session, as every refusal is.
func (s *Server) run(w http.ResponseWriter, r *http.Request, ss *session, l legs) {
	c, ok := s.answerClient(w, r, ss, l)
	if !ok {
		return
	}
	ctx, done := s.sessionContext(r.Context())
	defer done()
	ss.open(l.route())
	ss.finish(r, s.carry(ctx, r, ss, l, c))
}

// clientSide is the client's side of a session, answered: its WebSocket
// (translated, tunneled: gorilla did the handshake) or its connection as
// it was (the others).
type clientSide struct {
	ws   *websocket.Conn
	conn net.Conn
}

// answerClient takes the client's connection over and answers it; on failure
// the runtime's side is closed and the request rejected.
func (s *Server) answerClient(w http.ResponseWriter, r *http.Request, ss *session, l legs) (clientSide, bool) {
	switch l := l.(type) {
	case translatedLegs:
		return s.handshake(w, r, ss, s.rcUpgrader, nil)
	case tunnelLegs:
		return s.handshake(w, r, ss, s.pfUpgrader, l.runtime)
	case *modeLegs:
		up := s.reverseUpgrader
		if l.mode == RouteUDP {
			up = s.udpUpgrader
		}
		return s.handshake(w, r, ss, up, l)
	case takenOver:
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			l.runtime.Close() // done with it: a failed close changes nothing
			ss.refuse(w, r, http.StatusInternalServerError, fmt.Errorf("taking over the client connection: %w", err))
			return clientSide{}, false
		}
		// The request's read deadline is not the session's; what the
		// HTTP server had buffered stays in front, so a first frame sent
		// with the handshake is not lost.
		_ = conn.SetDeadline(time.Time{}) // fails only once closed; the session's I/O then says why
		if err := upgrade.SwitchProtocols(brw.Writer, l.reply); err != nil {
			conn.Close()      // done with it: a failed close changes nothing
			l.runtime.Close() // likewise
			ss.rejected(r, http.StatusBadGateway, fmt.Errorf("answering the client: %w", err))
			return clientSide{}, false
		}
		return clientSide{conn: upgrade.Unread(conn, brw.Reader)}, true
	}
	panic(fmt.Sprintf("server: no answer for %T", l)) // legs are open.go's types alone
}

// handshake answers the client's WebSocket with gorilla's handshake; on
// failure gorilla has answered (400 with the reason), the pod's side
// already open (the runtime's connection, a mode's listeners; nil: none)
// is closed and the request rejected.
func (s *Server) handshake(w http.ResponseWriter, r *http.Request, ss *session, up *websocket.Upgrader, opened io.Closer) (clientSide, bool) {
	ws, err := up.Upgrade(wire.Hijacker{ResponseWriter: w}, r, nil)
	if err != nil {
		if opened != nil {
			opened.Close() // done with it: a failed close changes nothing
		}
		ss.rejected(r, http.StatusBadRequest, fmt.Errorf("WebSocket handshake failed: %w", err))
		return clientSide{}, false
	}
	return clientSide{ws: ws}, true
}

// carry hands the session to the translator function of its route.
func (s *Server) carry(ctx context.Context, r *http.Request, ss *session, l legs, c clientSide) outcome {
	cfg, obs := s.cfg.Translator, ss.observer(r)
	cfg.Resets = resetCounter{s.cfg.Metrics, l.route()}
	switch l := l.(type) {
	case translatedLegs:
		res := translator.ServeRemoteCommand(ctx, c.ws, l.dialer.dial, l.streams, cfg, obs)
		o := outcome{bytes: map[string]uint64{}, status: res.Status, exited: true, err: res.Err}
		for ch, n := range res.Bytes {
			o.bytes[channelNames[ch]] = n
		}
		if res.NodeEnded {
			o.endedBy = "node"
		}
		return o
	case *modeLegs:
		return s.carryModes(ctx, l, c.ws)
	case tunnelLegs:
		res := translator.ServeTunnel(ctx, c.ws, l.runtime, cfg)
		return outcome{bytes: map[string]uint64{"tunnel-up": res.BytesUp, "tunnel-down": res.BytesDown}, err: res.Err}
	case takenOver:
		if l.via == RouteProxiedSPDY {
			return relayOutcome(translator.RelaySPDY(ctx, c.conn, l.runtime, l.proto, cfg, obs))
		}
		return spliceOutcome(l.via, ss.subresource, translator.Splice(ctx, c.conn, l.runtime, l.proto, cfg, obs))
	}
	panic(fmt.Sprintf("server: no carrier for %T", l)) // legs are open.go's types alone
}

// relayOutcome is how a relayed SPDY session ended.
func relayOutcome(res translator.RelayResult) outcome {
	// v4 remotecommand: the node read the status on the error stream.
	o := outcome{bytes: map[string]uint64{"spdy-up": res.BytesUp, "spdy-down": res.BytesDown},
		status: res.Status, exited: res.Status != nil}
	if res.Lost > 0 || res.Err != nil {
		o.endedBy, o.err = "runtime", res.Err
		if o.err == nil {
			o.err = fmt.Errorf("the runtime cut the session; the client was told on %d error streams", res.Lost)
		}
	}
	return o
}

// spliceOutcome is how a spliced session (direct, proxied-websocket)
// ended.
func spliceOutcome(via Route, sub string, res translator.SpliceResult) outcome {
	ch := "websocket"
	if via == RouteDirect {
		ch = "direct"
	}
	// v5 and v4.channel.k8s.io: the node read the status; a direct
	// remotecommand without one is a client that left first.
	o := outcome{bytes: map[string]uint64{ch + "-up": res.BytesUp, ch + "-down": res.BytesDown}, status: res.Status,
		exited: res.Status != nil || (via == RouteDirect && sub != PortForward)}
	if res.IdleTimeout {
		o.endedBy = "node"
	}
	if res.RuntimeLost {
		o.endedBy, o.err = "runtime", errors.New("container runtime connection lost")
	}
	return o
}

// sessionContext ties a session to the server's life, so Shutdown ends it
// with its cause (what the client is told).
func (s *Server) sessionContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := context.AfterFunc(s.baseCtx, func() { cancel(context.Cause(s.baseCtx)) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}
