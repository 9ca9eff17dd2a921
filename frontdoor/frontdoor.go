// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/server"
)

// OwnMetricsPath is where kubestream's own metrics are served, as a
// patched kubelet serves them: below the kubelet's /metrics, so they need
// get nodes/metrics as the kubelet's do.
const OwnMetricsPath = "/metrics/streaming"

// Config is what a Handler serves with.
type Config struct {
	// NodeName is the name requests are authorized against (nodes/NAME).
	NodeName string
	// Streaming serves /exec, /attach and /portForward: kubestream's
	// server, configured with the same Authenticator and Authorizer and
	// with Attributes as its request attributes.
	Streaming http.Handler
	// Own serves kubestream's own metrics at OwnMetricsPath.
	Own http.Handler
	// Kubelet is the local kubelet's URL (https://127.0.0.1:10250), and
	// Transport reaches it with kubestream's own credential
	// (KubeletTransport).
	Kubelet   *url.URL
	Transport http.RoundTripper
	// Anonymous reaches the kubelet with no credential (PinnedTransport):
	// a path the kubelet does not serve at all it answers 404 before it
	// authenticates, and the front door asks it so, for a refused
	// request, to answer as the kubelet would.
	Anonymous http.RoundTripper
	// Authenticator and Authorizer are the kubelet's: its client CA,
	// TokenReview and anonymous setting; its authorization mode.
	Authenticator authenticator.Request
	Authorizer    server.Authorizer
}

// Handler is the node's front door (see the package doc).
type Handler struct {
	cfg   Config
	proxy *httputil.ReverseProxy
}

// New checks cfg and returns its Handler.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Streaming == nil || cfg.Own == nil:
		return nil, errors.New("frontdoor: Config needs Streaming and Own")
	case cfg.Kubelet == nil || cfg.Transport == nil || cfg.Anonymous == nil:
		return nil, errors.New("frontdoor: Config needs the kubelet's URL, a Transport and an Anonymous one")
	case cfg.Authenticator == nil || cfg.Authorizer == nil:
		return nil, errors.New("frontdoor: Config needs an Authenticator and an Authorizer")
	}
	h := &Handler{cfg: cfg}
	kubelet := cfg.Kubelet
	h.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(kubelet)
			pr.Out.Host = "" // the kubelet's own, as the URL says
			// The caller's credential stays here; the Transport adds
			// kubestream's.
			pr.Out.Header.Del("Authorization")
		},
		Transport: cfg.Transport,
		// A response of unknown length (logs -f) is flushed as each read
		// returns (ReverseProxy's rule); one of known length is copied
		// through its 32 KiB buffer.
		ErrorHandler: h.kubeletError,
	}
	return h, nil
}

// ServeHTTP routes a request: streaming paths to kubestream's server, its
// own metrics, and everything else through the guard to the kubelet.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case isStreaming(r.URL.Path):
		h.cfg.Streaming.ServeHTTP(w, r)
	case r.URL.Path == OwnMetricsPath:
		h.guard(w, r, h.cfg.Own)
	default:
		h.guard(w, r, h.proxy)
	}
}

// isStreaming says whether path is one kubestream's server routes:
// /exec and /attach with a namespace, pod, optional UID and container;
// /portForward with a namespace, pod and optional UID. Any other shape
// goes to the kubelet, which answers it as it would.
func isStreaming(path string) bool {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for _, p := range parts {
		if p == "" {
			return false
		}
	}
	switch parts[0] {
	case "exec", "attach":
		return len(parts) == 4 || len(parts) == 5
	case "portForward":
		return len(parts) == 3 || len(parts) == 4
	}
	return false
}

// guard authenticates and authorizes r as the kubelet's filter does
// (server.Authenticate and Authorize, with the kubelet's attributes for
// its path), then hands it to next.
func (h *Handler) guard(w http.ResponseWriter, r *http.Request, next http.Handler) {
	u, refused := server.Authenticate(r, h.cfg.Authenticator)
	if refused == nil {
		refused = server.Authorize(r, h.cfg.Authorizer, u, Attributes(h.cfg.NodeName, u, r))
	}
	switch {
	case refused == nil:
		next.ServeHTTP(w, r)
	case refused.Code == http.StatusInternalServerError:
		writeError(w, refused.Code, refused.Msg)
	default:
		h.refuse(w, r, refused.Code, refused.Msg)
	}
}

// refuse answers a request the guard refused as the kubelet would: 404 if
// the kubelet serves nothing at its path (the kubelet says so before it
// authenticates anyone), else code and msg. The kubelet is asked with a
// GET of the path alone and no credential, so the question runs nothing
// and tells no more than the kubelet tells anyone.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	probe := &url.URL{Scheme: h.cfg.Kubelet.Scheme, Host: h.cfg.Kubelet.Host, Path: r.URL.Path}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, probe.String(), nil)
	if err == nil {
		if resp, err := h.cfg.Anonymous.RoundTrip(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound {
				writeError(w, http.StatusNotFound, "404 page not found\n")
				return
			}
		}
	}
	writeError(w, code, msg)
}

// kubeletError answers a request the kubelet did not: 502, saying so,
// unless the caller itself went away.
func (h *Handler) kubeletError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	klog.FromContext(r.Context()).Error(err, "The kubelet did not answer", "path", r.URL.Path)
	writeError(w, http.StatusBadGateway, fmt.Sprintf("kubestream: the kubelet at %s did not answer: %v", h.cfg.Kubelet.Host, err))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}
