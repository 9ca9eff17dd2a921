package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/internal/upgrade"
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
			l, ok = s.openTranslated(w, r, ss, q, u)
		case RouteTunneled:
			l, ok = s.openTunnel(w, r, ss, u)
		case RouteProxiedSPDY:
			l, ok = s.openRelaySPDY(w, r, ss, u)
		case RouteProxiedWebSocket:
			l, ok = s.openRelayWebSocket(w, r, ss, u)
		}
	}
	if ok {
		s.run(r, ss, l)
	}
}

// run carries a session whose legs are open, whatever its route: tied to
// the server's life (Shutdown ends it), counted active and on the audit
// record from its start, recorded when due (a tty), and wrapped up once.
func (s *Server) run(r *http.Request, ss *session, l legs) {
	ctx, done := s.sessionContext(r.Context())
	defer done()
	ss.open(l.route())
	ss.finish(r, s.carry(ctx, r, ss, l))
}

// carry hands the legs to the translator function of their route, first
// writing the 101 of a taken-over connection.
func (s *Server) carry(ctx context.Context, r *http.Request, ss *session, l legs) outcome {
	cfg, obs := s.cfg.Translator, ss.observer(r)
	cfg.Resets = resetCounter{s.cfg.Metrics, l.route()}
	switch l := l.(type) {
	case translatedLegs:
		res := translator.ServeRemoteCommand(ctx, l.ws, l.dial, l.streams, cfg, obs)
		o := outcome{bytes: map[string]uint64{}, status: res.Status, exited: true, err: res.Err}
		for ch, n := range res.Bytes {
			o.bytes[channelNames[ch]] = n
		}
		if res.NodeEnded {
			o.endedBy = "node"
		}
		return o
	case tunnelLegs:
		res := translator.ServeTunnel(ctx, l.ws, l.runtime, cfg)
		return outcome{bytes: map[string]uint64{"tunnel-up": res.BytesUp, "tunnel-down": res.BytesDown}, err: res.Err}
	case takenOver:
		if err := upgrade.SwitchProtocols(l.bw, l.answer); err != nil {
			l.client.Close()  // done with it: a failed close changes nothing
			l.runtime.Close() // likewise
			return outcome{err: fmt.Errorf("answering the client: %w", err)}
		}
		if l.via == RouteProxiedSPDY {
			return relayOutcome(translator.RelaySPDY(ctx, l.client, l.runtime, l.proto, cfg, obs))
		}
		return spliceOutcome(l.via, ss.subresource, translator.Splice(ctx, l.client, l.runtime, l.proto, cfg, obs))
	}
	panic(fmt.Sprintf("server: no carrier for %T", l)) // legs are this file's types alone
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

// sessionContext ties a session to the server's life, so Shutdown ends it.
func (s *Server) sessionContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.baseCtx, cancel)
	s.sessions.Add(1)
	return ctx, func() {
		stop()
		cancel()
		s.sessions.Done()
	}
}
