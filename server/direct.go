package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/internal/upgrade"
)

// DirectMode says whether a client's WebSocket may go to the runtime
// unchanged when the runtime's streaming server speaks the protocol itself.
type DirectMode string

const (
	// DirectAuto offers the WebSocket to the runtime first and translates
	// when the runtime refuses it; a refusal is remembered for
	// DirectConfig.Recheck so runtimes that never speak it (containerd and
	// CRI-O today) cost one extra CRI call per period, not per session.
	DirectAuto DirectMode = "auto"
	// DirectNever always translates.
	DirectNever DirectMode = "never"
)

// DirectConfig is the direct WebSocket CRI path's setting.
type DirectConfig struct {
	Mode    DirectMode    // DirectAuto when empty
	Recheck time.Duration // how long a refusal is remembered; 10 minutes when 0
}

// directCache remembers, per runtime handler, subresource and protocol,
// that the runtime refused the WebSocket: a node may run runc beside a
// handler whose runtime does not speak v5, and one's refusal must not turn
// the other's sessions into translations. A runtime can be upgraded under a running node, so
// a refusal expires; an acceptance needs no memory, since every attempt
// learns the answer again at no cost.
type directCache struct {
	cfg     DirectConfig
	now     func() time.Time
	mu      sync.Mutex
	refused map[string]time.Time // until when
}

func newDirectCache(cfg DirectConfig) *directCache {
	if cfg.Mode == "" {
		cfg.Mode = DirectAuto
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = 10 * time.Minute
	}
	return &directCache{cfg: cfg, now: time.Now, refused: map[string]time.Time{}}
}

func (c *directCache) auto() bool { return c.cfg.Mode == DirectAuto }

func (c *directCache) worthTrying(handler, sub, protocol string) bool {
	if c.cfg.Mode != DirectAuto {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.refused[handler+" "+sub+" "+protocol]
	return !ok || c.now().After(until)
}

func (c *directCache) record(handler, sub, protocol string, accepted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if accepted {
		delete(c.refused, handler+" "+sub+" "+protocol)
	} else {
		c.refused[handler+" "+sub+" "+protocol] = c.now().Add(c.cfg.Recheck)
	}
}

// offerDirect offers a WebSocket that kubestream would translate or tunnel
// to the runtime as it is, when the runtime may speak it (DirectAuto, and
// this pod's runtime handler did not refuse lately). ok is false when the
// client has had its answer (the runtime could not be reached). Otherwise
// either the runtime took the WebSocket (ss.route is RouteDirect, l its
// legs) or kubestream carries the session itself with next: u when no
// offer was made, a fresh URL when the runtime refused (u is single-use).
func (s *Server) offerDirect(w http.ResponseWriter, r *http.Request, ss *session, q request, u *url.URL) (l legs, next *url.URL, ok bool) {
	if !ss.direct {
		return legs{}, u, true
	}
	ctx := r.Context()
	handler := s.runtimeHandler(ctx, q.pod)
	if !s.direct.worthTrying(handler, ss.subresource, ss.protocol) {
		return legs{}, u, true
	}
	key := r.Header.Get("Sec-WebSocket-Key")
	dctx, cancel := context.WithTimeout(ctx, s.cfg.Translator.StreamCreationTimeout)
	rt, err := upgrade.WebSocket(dctx, u, s.cfg.RuntimeTLS, key, ss.protocol)
	cancel()
	var ue *upgrade.Error
	switch {
	case errors.As(err, &ue) && ue.StatusCode >= 400 && ue.StatusCode < 500,
		// A 101 the client would reject: the runtime does not speak it.
		errors.Is(err, upgrade.ErrUnusableHandshake):
		klog.FromContext(ctx).V(2).Info("Runtime refused the WebSocket; translating", "err", err,
			"protocol", ss.protocol, "recheckAfter", s.direct.cfg.Recheck)
	case err != nil:
		ss.refuse(w, r, upgradeStatus(err), err)
		return legs{}, nil, false
	default:
		s.direct.record(handler, ss.subresource, ss.protocol, true)
		ss.offered(true)
		ss.route = RouteDirect
		l, ok = s.takeOver(w, r, ss, rt, ss.protocol, upgrade.WebSocketAnswer(key, ss.protocol))
		return l, nil, ok
	}
	s.direct.record(handler, ss.subresource, ss.protocol, false)
	ss.offered(false)
	if next, err = q.runtimeURL(ctx, s.cfg.URLs); err != nil {
		ss.refuse(w, r, cri.HTTPStatus(err), err)
		return legs{}, nil, false
	}
	return legs{}, next, true
}

// runtimeHandler names the handler serving pod, for the refusal memory; ""
// when the URL source cannot tell, or the lookup fails (the offer then
// goes ahead and its answer is what counts).
func (s *Server) runtimeHandler(ctx context.Context, pod cri.PodRef) string {
	hs, ok := s.cfg.URLs.(cri.HandlerSource)
	if !ok {
		return ""
	}
	h, err := hs.RuntimeHandler(ctx, pod)
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Runtime handler unknown", "pod", pod, "err", err)
		return ""
	}
	return h
}
