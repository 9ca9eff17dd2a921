// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package server is kubestream's kubelet-side streaming server: it serves
// the kubelet API's /exec, /attach and /portForward, decides per request
// whether to translate, tunnel or pass the upgrade through, resolves pods
// through cri and hands sessions to translator.
//
// Reading order, each file before the files it uses, which is one
// request's path: server.go (routes, authentication and authorization),
// stream.go (serveStream: the whole path; run and carry: every session's
// runner), direct.go (a WebSocket offered to the runtime first), open.go
// (each route's legs) and admit.go (the route from the headers, the
// session limits) and portmodes.go (reverse and UDP port-forward, served
// by the node itself, as far as the operator allows) with podwatch.go (one
// check of a pod for all its sessions), session.go (its metrics and audit
// record, and finish, every session's one wrap-up), config.go (Config,
// PortForwardModes and Server), request.go
// (what was asked, the runtime's URL), audit.go, metrics.go (the metrics,
// in component-base's registry) and limits.go (the session limits) with
// limits_unix.go and limits_other.go (the descriptor limit they default
// from), then protocol.go (the classifier), directcache.go and auth.go
// (Authenticate and Authorize: the kubelet's authentication and
// authorization, which the guard and kubestream node's front door share).
//
// What runs back up the order: every file's methods hang on Server, which
// config.go defines with the state they share (one type's methods spread
// over files by job, so each file stays small).
//
// Nothing a client sends makes it panic: a bad request is an HTTP error,
// a bad frame the session's end. It panics only on a programmer's error,
// each marked where it is (a legs type run or carry does not know, a
// feature gate registered twice).
package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/internal/wire"
	"github.com/kubestream/kubestream/portmux"
	"github.com/kubestream/kubestream/translator"
)

// New checks cfg and builds the handler. It takes no context because it
// starts nothing: sessions start in ServeHTTP, under the request's
// context, and Shutdown ends them.
func New(cfg Config) (*Server, error) {
	if cfg.URLs == nil {
		if cfg.Lookup == nil || cfg.Runtime == nil {
			return nil, fmt.Errorf("server needs a URL source, or a pod lookup and a runtime")
		}
		cfg.URLs = cri.ByLookup{Lookup: cfg.Lookup, Runtime: cfg.Runtime}
	}
	if cfg.Features == nil {
		cfg.Features = NewFeatureGate()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Authorizer == nil {
		// Standalone, a certificate from the client CA is the grant, as for
		// a kubelet in AlwaysAllow mode; a kubelet plugs in its webhook.
		cfg.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	}
	if cfg.Translator.BufferSize == 0 {
		cfg.Translator = translator.DefaultConfig()
	}
	s := &Server{cfg: cfg, direct: newDirectCache(cfg.Direct), slots: &sessionSlots{limits: cfg.Limits},
		pods: &podWatches{sandboxes: cfg.Sandboxes, period: cfg.PortForwardModes.PodCheckPeriod}}
	s.baseCtx, s.cancelBase = context.WithCancelCause(context.Background())
	s.rcUpgrader = wire.NewUpgrader(remotecommand.StreamProtocolV5Name, cfg.Translator.WriteTimeout)
	s.pfUpgrader = wire.NewUpgrader(portforward.WebsocketsSPDYTunnelingPortForwardV1, cfg.Translator.WriteTimeout)
	s.reverseUpgrader = wire.NewUpgrader(portmux.ReverseProtocol, cfg.Translator.WriteTimeout)
	s.udpUpgrader = wire.NewUpgrader(portmux.UDPProtocol, cfg.Translator.WriteTimeout)
	mux := http.NewServeMux()
	for _, p := range []string{"/exec/{namespace}/{pod}/{container}", "/exec/{namespace}/{pod}/{uid}/{container}"} {
		mux.Handle(p, s.guard("proxy", streamHandler{s, Exec}))
	}
	for _, p := range []string{"/attach/{namespace}/{pod}/{container}", "/attach/{namespace}/{pod}/{uid}/{container}"} {
		mux.Handle(p, s.guard("proxy", streamHandler{s, Attach}))
	}
	for _, p := range []string{"/portForward/{namespace}/{pod}", "/portForward/{namespace}/{pod}/{uid}"} {
		mux.Handle(p, s.guard("proxy", streamHandler{s, PortForward}))
	}
	mux.Handle("/metrics", s.guard("metrics", cfg.Metrics.Handler()))
	// /healthz (and /healthz/runtime) says whether sessions can be served:
	// the runtime answers and is ready. /livez (and /healthz/ping) only
	// says the process serves, for liveness probes that must not restart
	// the node's streaming server because the runtime is down.
	checks := []healthz.HealthChecker{healthz.PingHealthz}
	if cfg.RuntimeReady != nil {
		checks = append(checks, healthz.NamedCheck("runtime", func(r *http.Request) error { return cfg.RuntimeReady(r.Context()) }))
	}
	healthz.InstallHandler(mux, checks...)
	healthz.InstallLivezHandler(mux, healthz.PingHealthz)
	s.handler = mux
	return s, nil
}

// Shutdown ends every WebSocket session (clients get a status saying
// Config.ShutdownMessage, and a close frame) and waits for them, or for
// ctx. Sessions passed through to the runtime end with the http.Server that
// owns their connections.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true // requests from now on get 503
	s.mu.Unlock()
	s.cancelBase(translator.Stopping(s.cfg.ShutdownMessage))
	return s.wait(ctx)
}

// Drain refuses new sessions (503) and waits, or for ctx, for those
// running to end on their own, telling them nothing: a node that hands
// its work to another process (a rolling update) lets them finish. A
// Shutdown after it ends those still running.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	return s.wait(ctx)
}

// wait waits for every admitted session to end, or for ctx.
func (s *Server) wait(ctx context.Context) error {
	// One waiter for every call: a call that times out leaves it to end
	// with the last session, not a goroutine a call.
	s.drainOnce.Do(func() {
		s.drained = make(chan struct{})
		go func() {
			s.sessions.Wait()
			close(s.drained)
		}()
	})
	select {
	case <-s.drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// streamHandler serves one streaming subresource (stream.go).
type streamHandler struct {
	s   *Server
	sub string
}

func (h streamHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.s.serveStream(w, r, h.sub)
}

// Metrics returns the server's metrics.
func (s *Server) Metrics() *Metrics { return s.cfg.Metrics }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// guard authenticates and authorizes as the kubelet does: resource nodes,
// subresource proxy (streaming) or metrics, verb get for GET and create for
// POST; streaming requests need create whatever their method unless
// Config.StreamingVerbByMethod.
func (s *Server) guard(subresource string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb := Verb(r.Method)
		if subresource == "proxy" && !s.cfg.StreamingVerbByMethod {
			verb = "create"
		}
		u, refused := Authenticate(r, s.cfg.Authenticator)
		if refused == nil {
			refused = Authorize(r, s.cfg.Authorizer, u, s.attributes(r, u, verb, subresource))
		}
		switch {
		case refused == nil:
			logger := klog.FromContext(r.Context()).WithValues("user", u.GetName())
			next.ServeHTTP(w, r.WithContext(apirequest.WithUser(klog.NewContext(r.Context(), logger), u)))
		case subresource != "proxy":
			http.Error(w, refused.Msg, refused.Code)
		default:
			// A streaming request refused here is answered, counted and
			// on record through its session, as every refusal is.
			ss := s.begin(r, subresourceOf(r.URL.Path), decision{route: RouteRejected})
			if ss.ev != nil {
				ss.ev.User = userInfo(u)
			}
			ss.refuse(w, r, refused.Code, errors.New(strings.TrimSuffix(refused.Msg, "\n")))
		}
	})
}

// attributes is what a request to subresource is authorized as: the
// embedder's (RequestAttributes) with kubestream's verb, or resource
// nodes, the node's name and subresource.
func (s *Server) attributes(r *http.Request, u user.Info, verb, subresource string) []authorizer.Attributes {
	if s.cfg.RequestAttributes == nil {
		return []authorizer.Attributes{authorizer.AttributesRecord{User: u, Verb: verb, APIVersion: "v1",
			Resource: "nodes", Subresource: subresource, Name: s.cfg.NodeName, ResourceRequest: true, Path: r.URL.Path}}
	}
	var attrs []authorizer.Attributes
	for _, a := range s.cfg.RequestAttributes(r.Context(), u, r) {
		attrs = append(attrs, withVerb{a, verb})
	}
	return attrs
}

// withVerb is an embedder's attributes with the verb kubestream requires.
type withVerb struct {
	authorizer.Attributes
	verb string
}

func (a withVerb) GetVerb() string { return a.verb }

// Verb is the kubelet's verb for an HTTP method: get, create, update,
// patch, delete; "" for any other method, which no rule grants.
func Verb(method string) string {
	switch method {
	case http.MethodGet:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}
