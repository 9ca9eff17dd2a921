package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/translator"
)

// proxy passes the upgrade to the runtime, as a kubelet does: the runtime's
// answer, 101 or an error, goes back to the client. The node still follows
// the session (relaySPDY, relayWebSocket), because a byte copy loses output
// when the runtime closes with the client's pings unread.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL) {
	if ss.route == RouteProxiedSPDY {
		s.relaySPDY(w, r, ss, u)
		return
	}
	s.relayWebSocket(w, r, ss, u)
}

// relaySPDY passes a SPDY upgrade to the runtime with the client's
// protocol list and relays the session with translator.RelaySPDY, which
// keeps the client's pings off the runtime and tells the client when the
// runtime cut its session (issue: a slow reader lost output silently).
func (s *Server) relaySPDY(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL) {
	ctx := r.Context()
	dctx, cancel := context.WithTimeout(ctx, s.cfg.Translator.StreamCreationTimeout)
	rt, proto, err := upgrade.SPDY(dctx, u, s.cfg.RuntimeTLS, r.Header.Values(httpstream.HeaderProtocolVersion))
	cancel()
	if err != nil {
		failPassThrough(w, r, ss, err)
		return
	}
	conn, bw, err := takeOver(w)
	if err != nil {
		rt.Close()
		ss.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	sctx, done := s.sessionContext(ctx)
	defer done()
	defer ss.running()()
	// A write that fails here fails again in the relay, which ends then.
	_ = upgrade.SwitchProtocols(bw, http.Header{httpstream.HeaderConnection: {httpstream.HeaderUpgrade},
		httpstream.HeaderUpgrade: {"SPDY/3.1"}, httpstream.HeaderProtocolVersion: {proto}})
	res := translator.RelaySPDY(sctx, conn, rt, proto, s.cfg.Translator, ss.observer(r))
	ss.closeRecording(r)
	ss.carried("spdy-up", res.BytesUp)
	ss.carried("spdy-down", res.BytesDown)
	if res.Status != nil { // v4 remotecommand: the node read the status
		ss.exited(res.Status)
	}
	logger := klog.FromContext(ctx)
	if res.Lost > 0 || res.Err != nil {
		ss.ended("runtime", res.Err)
		ss.failed("session")
		logger.V(2).Info("SPDY session cut by the runtime's side", "err", res.Err, "errorStreamsTold", res.Lost)
		return
	}
	logger.V(3).Info("SPDY session ended", "pingsAnswered", res.PingsAnswered, "duration", time.Since(ss.start))
}

// takeOver hijacks the client's connection for a session the node carries
// itself: the request's read deadline cleared (it is not the session's),
// and whatever the HTTP server had buffered kept in front of the
// connection, so a first frame sent with the handshake is not lost.
func takeOver(w http.ResponseWriter) (net.Conn, *bufio.Writer, error) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("taking over the client connection: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	return upgrade.Unread(conn, brw.Reader), brw.Writer, nil
}

// relayWebSocket passes a legacy WebSocket (v4.channel.k8s.io and older, or
// v5 with the gate off) to the runtime with the client's own handshake and
// splices the two (translator.Splice): the runtime's answer, 101 or a
// refusal, reaches the client as it was, and after the runtime's bare close
// the client closes first, so a slow reader's unread output is not reset.
func (s *Server) relayWebSocket(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL) {
	ctx := r.Context()
	key := r.Header.Get("Sec-WebSocket-Key")
	dctx, cancel := context.WithTimeout(ctx, s.cfg.Translator.StreamCreationTimeout)
	rt, proto, err := upgrade.WebSocketOffer(dctx, u, s.cfg.RuntimeTLS, key, headerList(r.Header, "Sec-WebSocket-Protocol"))
	cancel()
	if err != nil {
		failPassThrough(w, r, ss, err)
		return
	}
	client, bw, err := takeOver(w)
	if err != nil {
		rt.Close()
		ss.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	sctx, done := s.sessionContext(ctx)
	defer done()
	defer ss.running()()
	// A write that fails here fails again in the splice, which ends then.
	_ = upgrade.SwitchProtocols(bw, upgrade.WebSocketAnswer(key, proto))
	res := translator.Splice(sctx, client, rt, proto, s.cfg.Translator, ss.observer(r))
	ss.closeRecording(r)
	ss.carried("websocket-up", res.BytesUp)
	ss.carried("websocket-down", res.BytesDown)
	if res.Status != nil { // v4.channel.k8s.io: the node read the status
		ss.exited(res.Status)
	}
	klog.FromContext(ctx).V(3).Info("Legacy WebSocket session ended", "protocol", proto, "duration", time.Since(ss.start))
}

// failPassThrough answers a pass-through whose runtime dial failed: the
// runtime's own refusal goes back as it was, as a byte-for-byte proxy
// would have passed it; an unreachable runtime is a bad gateway.
func failPassThrough(w http.ResponseWriter, r *http.Request, ss *session, err error) {
	var ue *upgrade.Error
	if errors.As(err, &ue) {
		ss.fail(w, r, ue.StatusCode, errors.New(strings.TrimSpace(ue.Body)))
		return
	}
	ss.fail(w, r, upgradeStatus(err), err)
}
