package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/internal/upgrade"
)

// target is what a handler parsed from a request: how to get runtime
// streaming URLs for it, what to log it by, and how to carry the session
// when kubestream translates or tunnels it.
type target struct {
	// newURL asks the runtime for a fresh single-use URL on each call.
	newURL func(context.Context) (*url.URL, error)
	logKV  []any
	carry  func(w http.ResponseWriter, r *http.Request, ss *session, first *url.URL, newURL func(context.Context) (*url.URL, error))
	// describe puts what was asked for on the audit record.
	describe func(*audit.Event)
}

// serveStream is the one path of every streaming request, exec, attach and
// port-forward alike: admit (the route from headers alone, the session
// limits), parse the request, the first runtime URL; then pass the upgrade
// through (proxy.go), or offer it to the runtime as it is (direct.go) and,
// when the runtime refuses, carry it (remotecommand.go, portforward.go).
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, sub string, parse func(*http.Request) (target, error)) {
	ss, ok := s.admit(w, r, sub)
	if !ok {
		return
	}
	defer ss.release()
	t, err := parse(r)
	if err != nil {
		ss.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ss.describe(t)
	// Every route dials what this returns; a kubelet's URL source (its
	// GetExec) passes on what the runtime said as it is.
	newURL := func(ctx context.Context) (*url.URL, error) {
		u, err := t.newURL(ctx)
		if err != nil {
			return nil, err
		}
		return cri.ResolveStreamURL(u)
	}
	ctx := r.Context()
	u, err := newURL(ctx)
	if err != nil {
		ss.fail(w, r, cri.HTTPStatus(err), err)
		return
	}
	r = r.WithContext(klog.NewContext(ctx, klog.FromContext(ctx).WithValues(append([]any{"subresource", sub}, t.logKV...)...)))
	if ss.route != RouteTranslated && ss.route != RouteTunneled {
		s.proxy(w, r, ss, u)
		return
	}
	if s.cfg.WebSocketRequested != nil {
		s.cfg.WebSocketRequested(sub)
	}
	if u, ok = s.offerDirect(w, r, ss, u, newURL); !ok {
		return
	}
	t.carry(w, r, ss, u, newURL)
}

func podRef(r *http.Request) cri.PodRef {
	return cri.PodRef{Namespace: r.PathValue("namespace"), Name: r.PathValue("pod"), UID: r.PathValue("uid")}
}

// checkNames refuses path names no Kubernetes object can have, with a 400
// that says which, before they reach CRI (whose gRPC cannot even marshal a
// name that is not UTF-8).
func checkNames(pod cri.PodRef, container string, withContainer bool) error {
	bad := func(what, v string, errs []string) error {
		return fmt.Errorf("invalid %s %q: %s", what, v, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(pod.Namespace); len(errs) > 0 {
		return bad("namespace", pod.Namespace, errs)
	}
	if errs := validation.IsDNS1123Subdomain(pod.Name); len(errs) > 0 {
		return bad("pod name", pod.Name, errs)
	}
	if withContainer {
		if errs := validation.IsDNS1123Label(container); len(errs) > 0 {
			return bad("container name", container, errs)
		}
	}
	if pod.UID != "" && (!utf8.ValidString(pod.UID) || len(pod.UID) > 128 || strings.ContainsFunc(pod.UID, unicode.IsControl)) {
		return bad("pod UID", pod.UID, []string{"must be at most 128 printable UTF-8 characters"})
	}
	return nil
}

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

func (s *Server) upgrader(sub string) *websocket.Upgrader {
	if sub == PortForward {
		return s.pfUpgrader
	}
	return s.rcUpgrader
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
