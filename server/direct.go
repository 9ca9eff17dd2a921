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
	"github.com/kubestream/kubestream/translator"
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

// errRefused is a runtime that does not speak the client's WebSocket
// protocol: its single-use URL is spent and the caller translates instead.
var errRefused = errors.New("container runtime does not speak the protocol")

// refused remembers and counts a runtime that does not speak the client's
// protocol, and returns errRefused.
func (s *Server) refused(ctx context.Context, ss *session, msg string, kv ...any) error {
	s.direct.record(ss.handler, ss.subresource, ss.protocol, false)
	ss.offered(false)
	klog.FromContext(ctx).V(2).Info(msg, append(kv, "protocol", ss.protocol, "recheckAfter", s.direct.cfg.Recheck)...)
	return errRefused
}

// tryDirect offers the client's WebSocket handshake to the runtime. On the
// runtime's 101 it relays the answer to the client and splices the two
// connections until the session ends, and returns nil. errRefused means the
// runtime refused (the client has no answer yet); any other error is an
// unreachable or broken runtime, also with the client unanswered.
func (s *Server) tryDirect(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL) error {
	ctx := r.Context()
	logger := klog.FromContext(ctx)
	key := r.Header.Get("Sec-WebSocket-Key")
	dctx, cancel := context.WithTimeout(ctx, s.cfg.Translator.StreamCreationTimeout)
	rt, err := upgrade.WebSocket(dctx, u, s.cfg.RuntimeTLS, key, ss.protocol)
	cancel()
	var ue *upgrade.Error
	switch {
	case errors.As(err, &ue) && ue.StatusCode >= 400 && ue.StatusCode < 500:
		return s.refused(ctx, ss, "Runtime refused the WebSocket; translating", "status", ue.StatusCode)
	case errors.Is(err, upgrade.ErrUnusableHandshake):
		// A 101 the client would reject: treat the runtime as not speaking it.
		return s.refused(ctx, ss, "Runtime answered the WebSocket with an unusable handshake; translating", "err", err)
	case err != nil:
		return err
	}
	s.direct.record(ss.handler, ss.subresource, ss.protocol, true)
	ss.offered(true)
	ss.route = RouteDirect
	ss.count()

	client, brw, err := takeOver(w)
	if err != nil {
		rt.Close()
		ss.fail(w, r, http.StatusInternalServerError, err)
		return nil
	}
	ctx, done := s.sessionContext(ctx)
	defer done()
	defer ss.running()()
	if err := upgrade.SwitchProtocols(brw, upgrade.WebSocketAnswer(key, ss.protocol)); err != nil {
		rt.Close()
		client.Close()
		ss.failed("session")
		logger.V(2).Info("Client went away during the handshake", "err", err)
		return nil
	}
	res := translator.Splice(ctx, client, rt, ss.protocol, s.cfg.Translator, ss.observer(r))
	ss.closeRecording(r)
	ss.carried("direct-up", res.BytesUp)
	ss.carried("direct-down", res.BytesDown)
	if ss.subresource != PortForward {
		ss.exited(res.Status)
	}
	if res.RuntimeLost {
		ss.ended("runtime", errors.New("container runtime connection lost"))
		ss.failed("session")
	}
	if res.IdleTimeout {
		ss.ended("node", nil)
	}
	logger.V(3).Info("Direct session ended", "bytesUp", res.BytesUp, "bytesDown", res.BytesDown,
		"runtimeLost", res.RuntimeLost, "duration", time.Since(ss.start))
	return nil
}

// offerDirect offers a candidate WebSocket to the runtime (tryDirect). ok is
// true when kubestream must translate with the returned URL: the first one
// if no offer was made, a fresh one if the runtime refused (its URL is
// single-use). ok is false when the client has had its answer: the runtime
// served the session, or failed.
func (s *Server) offerDirect(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL,
	newURL func(context.Context) (*url.URL, error)) (*url.URL, bool) {
	if !ss.direct {
		return u, true
	}
	ss.handler = s.runtimeHandler(r.Context(), podRef(r))
	if !s.direct.worthTrying(ss.handler, ss.subresource, ss.protocol) {
		// This handler's runtime refused lately: translate with the URL
		// at hand, no offer.
		ss.direct = false
		ss.count()
		return u, true
	}
	err := s.tryDirect(w, r, ss, u)
	switch {
	case err == nil:
		return nil, false
	case !errors.Is(err, errRefused):
		ss.fail(w, r, upgradeStatus(err), err)
		return nil, false
	}
	ss.count()
	u, err = newURL(r.Context())
	if err != nil {
		ss.fail(w, r, cri.HTTPStatus(err), err)
		return nil, false
	}
	return u, true
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
