package server

// This file is kubestream's own port-forward modes, reverse and UDP
// (portmux): served by the node itself, never translated and never passed
// to the runtime. The listeners exist before the client's 101, so a port
// in use is an HTTP answer; the session then runs until the client leaves,
// the pod is deleted, the idle timeout or Shutdown.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/internal/netns"
	"github.com/kubestream/kubestream/portmux"
)

// PortForwardModes configure the reverse and UDP port-forward modes.
type PortForwardModes struct {
	// MaxConnections caps concurrent reverse connections or UDP
	// associations per session (0: none).
	MaxConnections int
	// UDPIdleTimeout closes a UDP association with no datagram this long.
	UDPIdleTimeout time.Duration
	// PodCheckPeriod is how often a session checks its pod still exists
	// (0: 5 s).
	PodCheckPeriod time.Duration
}

// DefaultPortForwardModes are the modes' settings a node starts with:
// kubestream serve's flags and the kubelet's configuration file change them.
var DefaultPortForwardModes = PortForwardModes{MaxConnections: 128, UDPIdleTimeout: time.Minute}

// modeLegs: a mode session's pod side, ready: the sandbox it watches, its
// network namespace and, for reverse, its listeners.
type modeLegs struct {
	mode      Route
	sandbox   string
	ns        netns.Namespace
	ports     []uint16
	listeners []portmux.Listener
}

func (l modeLegs) route() Route { return l.mode }

// Close closes the session's listeners, when it ends before it ran.
func (l modeLegs) Close() error {
	for _, pl := range l.listeners {
		_ = pl.L.Close() // done with it: a failed close changes nothing
	}
	return nil
}

// modesEnabled: the node can find a pod's sandbox and its network
// namespace, so it serves the modes (and offers them in its 403s).
func (s *Server) modesEnabled() bool { return s.cfg.Lookup != nil && s.cfg.Sandboxes != nil }

// openModes resolves pod → sandbox → network namespace and, for reverse,
// creates every listener before the client is answered.
func (s *Server) openModes(w http.ResponseWriter, r *http.Request, ss *session, q request, mode Route) (legs, bool) {
	if len(q.ports) == 0 {
		ss.refuse(w, r, http.StatusBadRequest, errors.New("port-forward needs at least one port parameter"))
		return nil, false
	}
	l := modeLegs{mode: mode}
	for _, p := range q.ports {
		l.ports = append(l.ports, uint16(p))
	}
	var err error
	if l.sandbox, err = s.cfg.Lookup.SandboxID(r.Context(), q.pod); err != nil {
		ss.refuse(w, r, cri.HTTPStatus(err), err)
		return nil, false
	}
	if l.ns.Path, err = s.cfg.Sandboxes.NetNS(r.Context(), l.sandbox); err != nil {
		ss.refuse(w, r, cri.HTTPStatus(err), fmt.Errorf("pod %s: %w", q.pod, err))
		return nil, false
	}
	if mode == RouteUDP {
		return l, true
	}
	for _, p := range l.ports {
		ln, err := l.ns.ListenTCP("", p)
		if err != nil {
			l.Close()
			code := http.StatusInternalServerError
			if errors.Is(err, netns.ErrPortInUse) {
				code = http.StatusConflict
			}
			ss.refuse(w, r, code, fmt.Errorf("reverse port-forward to pod %s: %w", q.pod, err))
			return nil, false
		}
		l.listeners = append(l.listeners, portmux.Listener{Port: p, L: ln})
	}
	return l, true
}

// carryModes runs the node end of the session, ended early when the pod's
// sandbox goes away.
func (s *Server) carryModes(ctx context.Context, r *http.Request, l modeLegs, ws *websocket.Conn) outcome {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watched := make(chan struct{})
	go func() { // ends with the session: ServeNode returns only once ctx's cause is told or the client left
		defer close(watched)
		s.watchPod(ctx, r, l.sandbox, cancel)
	}()
	cfg, tc := s.cfg.PortForwardModes, s.cfg.Translator
	nc := portmux.NodeConfig{Listeners: l.listeners, MaxConns: cfg.MaxConnections,
		IdleTimeout: tc.IdleTimeout, AssocIdleTimeout: cfg.UDPIdleTimeout,
		Keepalive: portmux.Keepalive{PingPeriod: tc.PingPeriod, PongTimeout: tc.PongTimeout, WriteTimeout: tc.WriteTimeout}}
	if l.mode == RouteUDP {
		nc.UDPPorts, nc.UDP = l.ports, l.ns
	}
	res := portmux.ServeNode(ctx, ws, nc)
	cancel(nil)
	<-watched
	mode := string(l.mode)
	s.cfg.Metrics.modeConns.WithLabelValues(mode, "opened").Add(float64(res.Conns))
	s.cfg.Metrics.modeConns.WithLabelValues(mode, "refused").Add(float64(res.Refused))
	o := outcome{bytes: map[string]uint64{mode + "-up": res.BytesUp, mode + "-down": res.BytesDn}, err: res.Err}
	if res.Err != nil && context.Cause(ctx) != nil && errors.Is(res.Err, context.Cause(ctx)) {
		o.endedBy = "node"
	}
	return o
}

// watchPod checks the sandbox every PodCheckPeriod and ends the session,
// saying why, once it is gone. A runtime that cannot answer is not a
// deleted pod: the session goes on.
func (s *Server) watchPod(ctx context.Context, r *http.Request, sandbox string, cancel context.CancelCauseFunc) {
	period := s.cfg.PortForwardModes.PodCheckPeriod
	if period <= 0 {
		period = 5 * time.Second
	}
	t := time.NewTicker(period)
	defer t.Stop()
	pod := podRef(r)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ready, err := s.cfg.Sandboxes.SandboxReady(ctx, sandbox)
		switch {
		case err != nil:
			klog.FromContext(ctx).V(2).Info("Checking the pod of a port-forward session failed", "err", err)
		case !ready:
			cancel(fmt.Errorf("pod %s/%s was deleted", pod.Namespace, pod.Name))
			return
		}
	}
}

var _ portmux.UDPDialer = netns.Namespace{}
