// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/websocket"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/wire"
)

// runtimeServer is the Server: the URLs it issued (tokens), and how it serves
// them, v5 and the tunnel itself (backend), every other protocol through
// cri-streaming's handlers (adapter).
type runtimeServer struct {
	backend
	adapter    *criAdapter
	tokens     *tokens
	handler    http.Handler
	http       *http.Server
	rcUpgrader *websocket.Upgrader
	pfUpgrader *websocket.Upgrader
	native     struct{ v5, tunnel bool }
	upstreamRC []string
	upstreamPF []string
	stop       context.CancelFunc // ends backend.ctx
}

// streamRequest is what exec and attach requests share.
type streamRequest interface {
	GetContainerId() string
	GetTty() bool
	GetStdin() bool
	GetStdout() bool
	GetStderr() bool
}

// command is what an exec or attach URL runs: the runtime's call, for a
// v5 session, and cri-streaming's handler, for every other protocol.
type command struct {
	req      streamRequest
	run      func(context.Context, processIO) error
	upstream func(http.ResponseWriter, *http.Request, *remotecommandserver.Options)
}

// serveCommand serves an exec or attach URL.
func (s *runtimeServer) serveCommand(w http.ResponseWriter, r *http.Request, kind string) {
	c, ok := s.commandFor(kind, s.tokens.consume(r.PathValue("token")))
	if !ok {
		s.config.Metrics.request(kind, "none")
		http.NotFound(w, r)
		return
	}
	opts := &remotecommandserver.Options{Stdin: c.req.GetStdin(), Stdout: c.req.GetStdout(), Stderr: c.req.GetStderr(), TTY: c.req.GetTty()}
	if s.native.v5 && offers(r, ProtocolV5) {
		s.config.Metrics.request(kind, ProtocolV5)
		s.serveNative(w, r, s.rcUpgrader, kind, func(ws *websocket.Conn, logger klog.Logger) {
			s.runV5(ws, logger, opts, c.run)
		})
		return
	}
	s.config.Metrics.request(kind, offered(r, s.upstreamRC))
	s.calls.run(func() { c.upstream(w, r, opts) }) // until the status is written: see Stop
}

// commandFor is what token was issued for, if it was issued for kind.
func (s *runtimeServer) commandFor(kind string, token any) (command, bool) {
	idle, creation := s.config.StreamIdleTimeout, s.config.StreamCreationTimeout
	switch req := token.(type) {
	case *runtimeapi.ExecRequest:
		return command{req: req, run: func(ctx context.Context, p processIO) error {
			return s.runtime.Exec(ctx, req.ContainerId, req.Cmd, p.stdin, p.stdout, p.stderr, req.Tty, p.resize)
		}, upstream: func(w http.ResponseWriter, r *http.Request, opts *remotecommandserver.Options) {
			remotecommandserver.ServeExec(w, r, s.adapter, "", "", req.ContainerId, req.Cmd, opts, idle, creation, s.upstreamRC)
		}}, kind == "exec"
	case *runtimeapi.AttachRequest:
		return command{req: req, run: func(ctx context.Context, p processIO) error {
			return s.runtime.Attach(ctx, req.ContainerId, p.stdin, p.stdout, p.stderr, req.Tty, p.resize)
		}, upstream: func(w http.ResponseWriter, r *http.Request, opts *remotecommandserver.Options) {
			remotecommandserver.ServeAttach(w, r, s.adapter, "", "", req.ContainerId, opts, idle, creation, s.upstreamRC)
		}}, kind == "attach"
	}
	return command{}, false
}

// servePortForward serves a port-forward URL.
func (s *runtimeServer) servePortForward(w http.ResponseWriter, r *http.Request, kind string) {
	req, ok := s.tokens.consume(r.PathValue("token")).(*runtimeapi.PortForwardRequest)
	if !ok {
		s.config.Metrics.request(kind, "none")
		http.NotFound(w, r)
		return
	}
	if s.native.tunnel && offers(r, ProtocolTunnel) {
		s.config.Metrics.request(kind, ProtocolTunnel)
		s.serveNative(w, r, s.pfUpgrader, kind, func(ws *websocket.Conn, logger klog.Logger) {
			s.runTunnel(ws, req.PodSandboxId, logger)
		})
		return
	}
	opts, err := portforward.BuildV4Options(req.Port)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.config.Metrics.request(kind, offered(r, s.upstreamPF))
	portforward.ServePortForward(w, r, s.adapter, req.PodSandboxId, "", opts,
		s.config.StreamIdleTimeout, s.config.StreamCreationTimeout, s.upstreamPF)
}

// serveNative runs a session served here on the connection up upgrades,
// counted as open until it ends.
func (s *runtimeServer) serveNative(w http.ResponseWriter, r *http.Request, up *websocket.Upgrader, kind string, session func(*websocket.Conn, klog.Logger)) {
	ws, err := up.Upgrade(wire.Hijacker{ResponseWriter: w}, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	defer s.config.Metrics.session(kind)()
	session(ws, klog.FromContext(r.Context()).WithValues("streaming", kind))
}

// offers reports whether r is a WebSocket upgrade offering protocol.
func offers(r *http.Request, protocol string) bool {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return false
	}
	return slices.Contains(websocket.Subprotocols(r), protocol)
}

// offered names, for the metrics, the protocol cri-streaming will pick: the
// first one the client offers that it supports (SPDY's
// X-Stream-Protocol-Version, or WebSocket's subprotocols; none offered is
// the legacy WebSocket protocol or the original SPDY one).
func offered(r *http.Request, supported []string) string {
	var offers []string
	ws := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	if ws {
		offers = websocket.Subprotocols(r)
	} else {
		for _, v := range r.Header.Values("X-Stream-Protocol-Version") {
			for _, p := range strings.Split(v, ",") {
				offers = append(offers, strings.TrimSpace(p))
			}
		}
	}
	for _, p := range offers {
		if slices.Contains(supported, p) || ws {
			return p
		}
	}
	if ws {
		return "websocket"
	}
	return "spdy"
}
