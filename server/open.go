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

	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/gorilla/websocket"
	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/internal/wire"
	"github.com/kubestream/kubestream/translator"
)

// The openers: each opens a session's legs for its route, or answers the
// client with the error it met and returns false. A runtime that must be
// dialled is dialled before the client is answered, so that its refusal
// is still an HTTP answer.

// openTranslated answers a v5 WebSocket; the translation dials the
// runtime's SPDY itself, with u first and a fresh URL on any later dial.
func (s *Server) openTranslated(w http.ResponseWriter, r *http.Request, ss *session, q request, u *url.URL) (legs, bool) {
	ws, err := s.rcUpgrader.Upgrade(wire.Hijacker{ResponseWriter: w}, r, nil)
	if err != nil {
		ss.handshakeFailed() // gorilla answered the client (400 with the reason)
		return nil, false
	}
	first := u
	dial := func(ctx context.Context, protocols []string) (net.Conn, string, error) {
		u := first
		first = nil
		if u == nil {
			var err error
			if u, err = q.runtimeURL(ctx, s.cfg.URLs); err != nil {
				return nil, "", err
			}
		}
		return upgrade.SPDY(ctx, u, s.cfg.RuntimeTLS, protocols)
	}
	return translatedLegs{ws: ws, dial: dial, streams: q.streams}, true
}

// openTunnel dials the runtime's SPDY port-forward, then answers the
// client's tunnel WebSocket: the tunnel has no status channel, so a
// runtime failure must still be an HTTP answer.
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
	ws, err := s.pfUpgrader.Upgrade(wire.Hijacker{ResponseWriter: w}, r, nil)
	if err != nil {
		rt.Close() // likewise
		ss.handshakeFailed()
		return nil, false
	}
	return tunnelLegs{ws: ws, runtime: rt}, true
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
	return s.takeOver(w, r, ss, RouteProxiedSPDY, rt, proto, http.Header{httpstream.HeaderConnection: {httpstream.HeaderUpgrade},
		httpstream.HeaderUpgrade: {"SPDY/3.1"}, httpstream.HeaderProtocolVersion: {proto}})
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
	return s.takeOver(w, r, ss, RouteProxiedWebSocket, rt, proto, upgrade.WebSocketAnswer(key, proto))
}

// takeOver hijacks the client's connection for a session of route via
// whose runtime leg is open (rt), the 101 with answer's headers to be
// written when it runs: the request's read deadline cleared (it is not the session's), and
// whatever the HTTP server had buffered kept in front of the connection,
// so a first frame sent with the handshake is not lost.
func (s *Server) takeOver(w http.ResponseWriter, r *http.Request, ss *session, via Route, rt net.Conn, proto string, answer http.Header) (legs, bool) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		rt.Close() // done with it: a failed close changes nothing
		ss.refuse(w, r, http.StatusInternalServerError, fmt.Errorf("taking over the client connection: %w", err))
		return nil, false
	}
	_ = conn.SetDeadline(time.Time{}) // fails only once closed; the session's I/O then says why
	return takenOver{via: via, client: upgrade.Unread(conn, brw.Reader), bw: brw.Writer, answer: answer, runtime: rt, proto: proto}, true
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

// legs are a session's two ends, open, one plain value per route: the
// route a session runs is its legs' (the runner sets it once from them).
type legs interface{ route() Route }

// translatedLegs: the client's v5 WebSocket, answered, and a way to dial
// the runtime's SPDY (the translation dials it itself).
type translatedLegs struct {
	ws      *websocket.Conn
	dial    translator.DialFunc
	streams translator.Options
}

// tunnelLegs: the client's tunnel WebSocket, answered, and the runtime's
// SPDY port-forward connection.
type tunnelLegs struct {
	ws      *websocket.Conn
	runtime net.Conn
}

// takenOver: a client connection taken over with its 101 still to write
// (direct, proxied-spdy, proxied-websocket), and the runtime's connection,
// upgraded with proto.
type takenOver struct {
	via     Route
	client  net.Conn
	bw      *bufio.Writer // where the 101 goes,
	answer  http.Header   // with these headers
	runtime net.Conn
	proto   string
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
