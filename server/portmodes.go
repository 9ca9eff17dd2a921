// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

// This file is kubestream's own port-forward modes, reverse and UDP
// (portmux): served by the node itself, never translated and never passed
// to the runtime, and only as far as the operator allows (PortForwardModes).
// Everything a session asks for is checked and its listeners exist before
// the client's 101, so a refusal is an HTTP answer; the session then runs
// until the client leaves, the pod is deleted, the idle timeout or
// Shutdown.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/gorilla/websocket"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/internal/netns"
	"github.com/kubestream/kubestream/portmux"
)

// access is mode's setting; off when the node cannot reach a pod's
// sandbox and network namespace.
func (s *Server) access(mode Route) ModeAccess {
	if s.cfg.Lookup == nil || s.cfg.Sandboxes == nil {
		return ModeOff
	}
	a := s.cfg.PortForwardModes.Reverse
	if mode == RouteUDP {
		a = s.cfg.PortForwardModes.UDP
	}
	if a == "" {
		return ModeOff
	}
	return a
}

// servedModes are the modes the classifier may choose (protocol.go).
func (s *Server) servedModes() servedModes {
	return servedModes{reverse: s.access(RouteReverse) != ModeOff, udp: s.access(RouteUDP) != ModeOff}
}

// modeLegs: a mode session's pod side, ready: the sandbox it watches, its
// network namespace (held open) and, for reverse, its listeners and the
// descriptors they are counted as.
type modeLegs struct {
	mode      Route
	pod       string // namespace/name: the key of its session limit
	sandbox   string
	ns        netns.Namespace
	ports     []uint16
	listeners []portmux.Listener
	slots     *sessionSlots
	charged   int // descriptors taken from slots for the listeners
	closed    bool
}

func (l *modeLegs) route() Route { return l.mode }

// Close lets go of what the legs hold, once.
func (l *modeLegs) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	l.slots.give(l.pod, l.charged)
	for _, pl := range l.listeners {
		_ = pl.L.Close() // done with it (ServeNode may have closed it): nothing to do on failure
	}
	return l.ns.Close()
}

// openModes checks what the session asks for against what the operator
// allows, resolves pod → sandbox → network namespace and, for reverse,
// creates every listener before the client is answered.
func (s *Server) openModes(w http.ResponseWriter, r *http.Request, ss *session, q request, mode Route) (legs, bool) {
	cfg := s.cfg.PortForwardModes
	l := &modeLegs{mode: mode, pod: q.pod.Namespace + "/" + q.pod.Name, slots: s.slots}
	for _, p := range q.ports {
		if slices.Contains(l.ports, uint16(p)) {
			ss.refuse(w, r, http.StatusBadRequest, fmt.Errorf("port %d is asked for twice", p))
			return nil, false
		}
		l.ports = append(l.ports, uint16(p))
	}
	switch {
	case len(l.ports) == 0:
		ss.refuse(w, r, http.StatusBadRequest, errors.New("port-forward needs at least one port parameter"))
		return nil, false
	case cfg.MaxPorts > 0 && len(l.ports) > cfg.MaxPorts:
		ss.refuse(w, r, http.StatusBadRequest, fmt.Errorf("%d ports asked for; this node forwards at most %d in one session", len(l.ports), cfg.MaxPorts))
		return nil, false
	}
	code, err := s.openNamespace(r.Context(), q.pod, l)
	if err == nil && mode == RouteReverse {
		code, err = s.openListeners(l)
	}
	if err != nil {
		l.Close()
		if code == http.StatusForbidden {
			// The node serves the mode, not to this pod or port: a client
			// tells that from a node without it by the header.
			w.Header().Set(httpstream.HeaderAcceptedProtocolVersions, ss.protocol)
		}
		ss.refuse(w, r, code, fmt.Errorf("%s to pod %s: %w", mode, q.pod, err))
		return nil, false
	}
	return l, true
}

// openNamespace finds the pod's sandbox, checks the operator allows the
// mode for it and holds its network namespace open.
func (s *Server) openNamespace(ctx context.Context, pod cri.PodRef, l *modeLegs) (int, error) {
	var err error
	if l.sandbox, err = s.cfg.Lookup.SandboxID(ctx, pod); err != nil {
		return cri.HTTPStatus(err), err
	}
	sb, err := s.cfg.Sandboxes.Sandbox(ctx, l.sandbox)
	if err != nil {
		return cri.HTTPStatus(err), err
	}
	key := ReverseAnnotation
	if l.mode == RouteUDP {
		key = UDPAnnotation
	}
	switch {
	case s.access(l.mode) == ModeOptIn && sb.Annotations[key] != "true":
		return http.StatusForbidden, fmt.Errorf("this node serves it only to pods annotated %s: \"true\"", key)
	case sb.HostNetwork && !s.cfg.PortForwardModes.AllowHostNetwork:
		return http.StatusForbidden, errors.New("the pod uses the node's network, and this node does not serve the mode to such pods")
	}
	if l.ns, err = netns.Open(sb.NetNS); err != nil {
		return http.StatusInternalServerError, err
	}
	if sb.PID > 0 {
		// The namespace is the process's, found by its PID: it is the
		// sandbox's only if the sandbox still has that process now that
		// the namespace is held (a PID is reused once its process ends).
		again, err := s.cfg.Sandboxes.Sandbox(ctx, l.sandbox)
		if err != nil || again.PID != sb.PID {
			return http.StatusConflict, fmt.Errorf("the pod's sandbox changed while its network namespace was opened (process %d)", sb.PID)
		}
	}
	return 0, nil
}

// openListeners checks reverse's ports and listens on each, counted
// against the session limits.
func (s *Server) openListeners(l *modeLegs) (int, error) {
	if !s.cfg.PortForwardModes.AllowPrivilegedPorts {
		start, err := l.ns.UnprivilegedPortStart()
		if err != nil {
			return http.StatusInternalServerError, err
		}
		for _, p := range l.ports {
			if int(p) < start {
				return http.StatusForbidden, fmt.Errorf("port %d is privileged in the pod (below %d), and this node does not listen on such ports", p, start)
			}
		}
	}
	if full := s.slots.take(l.pod, len(l.ports)); full != "" {
		return http.StatusTooManyRequests, fmt.Errorf("too many streaming sessions and connections on this %s; retry later", full)
	}
	l.charged = len(l.ports)
	for _, p := range l.ports {
		ln, err := l.ns.ListenTCP("", p)
		if err != nil {
			if errors.Is(err, netns.ErrPortInUse) {
				return http.StatusConflict, err
			}
			return http.StatusInternalServerError, err
		}
		l.listeners = append(l.listeners, portmux.Listener{Port: p, L: ln})
	}
	return 0, nil
}

// carryModes runs the node end of the session, ended early when the pod's
// sandbox goes away.
func (s *Server) carryModes(ctx context.Context, l *modeLegs, ws *websocket.Conn) outcome {
	defer l.Close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	unwatch := s.pods.watch(l.sandbox, l.pod, cancel)
	defer unwatch()
	cfg, tc := s.cfg.PortForwardModes, s.cfg.Translator
	nc := portmux.NodeConfig{Listeners: l.listeners, MaxConns: cfg.MaxConnections, MaxBuffered: cfg.MaxBufferedBytes,
		Descriptors: podDescriptors{s.slots, l.pod}, IdleTimeout: tc.IdleTimeout, AssocIdleTimeout: cfg.UDPIdleTimeout,
		Keepalive: portmux.Keepalive{PingPeriod: tc.PingPeriod, PongTimeout: tc.PongTimeout, WriteTimeout: tc.WriteTimeout}}
	if l.mode == RouteUDP {
		nc.UDPPorts, nc.UDP = l.ports, l.ns
	}
	res := portmux.ServeNode(ctx, ws, nc)
	mode := string(l.mode)
	s.cfg.Metrics.modeConns.WithLabelValues(mode, "opened").Add(float64(res.Conns))
	s.cfg.Metrics.modeConns.WithLabelValues(mode, "refused").Add(float64(res.Refused))
	o := outcome{bytes: map[string]uint64{mode + "-up": res.BytesUp, mode + "-down": res.BytesDn}, err: res.Err,
		conns: &audit.Connections{Opened: res.Conns, Refused: res.Refused}}
	if res.Err != nil && context.Cause(ctx) != nil && errors.Is(res.Err, context.Cause(ctx)) {
		o.endedBy = "node"
	}
	return o
}

var _ portmux.UDPDialer = netns.Namespace{}
