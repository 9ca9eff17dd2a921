// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/internal/upgrade"
)

// offerDirect offers a WebSocket that kubestream would translate or tunnel
// to the runtime as it is, when the runtime may speak it (DirectAuto, and
// this pod's runtime handler did not refuse lately). ok is false when the
// client has had its answer (the runtime could not be reached). Otherwise
// either the runtime took the WebSocket (l, the direct route's legs) or
// kubestream carries the session itself (l nil) with next: u when no offer
// was made, a fresh URL when the runtime refused (u is single-use).
func (s *Server) offerDirect(w http.ResponseWriter, r *http.Request, ss *session, q request, u *url.URL) (l legs, next *url.URL, ok bool) {
	if !ss.direct {
		return nil, u, true
	}
	ctx := r.Context()
	handler := s.runtimeHandler(ctx, q.pod)
	if !s.direct.worthTrying(handler, ss.subresource, ss.protocol) {
		return nil, u, true
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
		return nil, nil, false
	default:
		s.direct.remember(handler, ss.subresource, ss.protocol, true)
		ss.countOffer(true)
		return takenOver{via: RouteDirect, runtime: rt, proto: ss.protocol, reply: upgrade.WebSocketAnswer(key, ss.protocol)}, nil, true
	}
	s.direct.remember(handler, ss.subresource, ss.protocol, false)
	ss.countOffer(false)
	if next, err = q.runtimeURL(ctx, s.cfg.URLs); err != nil {
		ss.refuse(w, r, cri.HTTPStatus(err), err)
		return nil, nil, false
	}
	return nil, next, true
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
