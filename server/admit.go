// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/streaming/pkg/httpstream"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/translator"
)

// decide classifies the request and marks the WebSockets kubestream would
// translate or tunnel as candidates for the runtime's own WebSocket support.
func (s *Server) decide(r *http.Request, sub string) decision {
	d := classify(r, sub, s.webSocketsEnabled(), s.servedModes())
	// Whether this pod's runtime handler refused lately is known only
	// after its lookup (offerDirect).
	d.directCandidate = (d.route == RouteTranslated || d.route == RouteTunneled) && s.direct.auto()
	return d
}

// admit decides the route the headers ask for and answers the request if
// it is rejected or over a session limit; ok is false when the client has
// had its answer. The caller defers ss.release().
func (s *Server) admit(w http.ResponseWriter, r *http.Request, sub string) (*session, Route, bool) {
	d := s.decide(r, sub)
	ss := s.begin(r, sub, d)
	if d.route == RouteRejected {
		if code, err := s.kubeletFirst(r, sub, d); err != nil {
			ss.refuse(w, r, code, err)
			return nil, "", false
		}
		s.reject(w, r, ss, d)
		return nil, "", false
	}
	pod := podRef(r)
	release, full := s.slots.acquire(pod.Namespace + "/" + pod.Name)
	if full != "" {
		ss.countLimited(full)
		w.Header().Set("Retry-After", "1")
		ss.refuse(w, r, http.StatusTooManyRequests, fmt.Errorf("too many streaming sessions on this %s; retry later", full))
		return nil, "", false
	}
	if !s.track() {
		release()
		ss.refuse(w, r, http.StatusServiceUnavailable, translator.Stopping(s.cfg.ShutdownMessage))
		return nil, "", false
	}
	ss.release = func() {
		release()
		s.sessions.Done()
	}
	return ss, d.route, true
}

// kubeletFirst answers a request that is no upgrade as the kubelet would:
// it reads the parameters (400) and looks the pod up (404) before its
// streaming code sees the missing upgrade.
func (s *Server) kubeletFirst(r *http.Request, sub string, d decision) (int, error) {
	if !d.notUpgrade {
		return 0, nil
	}
	q, err := parseRequest(r, sub)
	if err != nil {
		return http.StatusBadRequest, err
	}
	if ps, ok := s.cfg.URLs.(cri.PodSource); ok {
		if err := ps.PodExists(r.Context(), q.pod); err != nil {
			return cri.HTTPStatus(err), err
		}
	}
	return 0, nil
}

func (s *Server) reject(w http.ResponseWriter, r *http.Request, ss *session, d decision) {
	if len(d.accepted) > 0 {
		w.Header().Set(httpstream.HeaderAcceptedProtocolVersions, strings.Join(d.accepted, ", "))
		d.message += "; accepted: " + strings.Join(d.accepted, ", ")
	}
	ss.refuse(w, r, d.status, errors.New(d.message))
}
