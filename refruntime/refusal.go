// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package refruntime

import (
	"net/http"
	"strings"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// quietRefusal answers an exec or attach WebSocket that offers only v5 (a
// protocol cri-streaming does not speak) as cri-streaming does, 403
// Forbidden with the URL's token spent (404 when it was unknown or spent
// already), but without cri-streaming's "Unhandled Error" line: a separate
// runtime prints that in its own log, and this one shares kubestream's
// stderr, where a refusal kubestream expects and handles is no error worth
// a newcomer's alarm. The token is spent by handing cri-streaming the
// request stripped of every upgrade header, which it refuses with a 400 it
// does not log. An offer that also lists an older protocol goes on to
// cri-streaming, which picks that one; so does the port-forward tunnel,
// which cri-streaming cannot be made to refuse quietly.
type quietRefusal struct {
	next   http.Handler
	logger klog.Logger
}

func (q quietRefusal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !onlyV5(r) || strings.Contains(r.URL.Path, "/portforward/") {
		q.next.ServeHTTP(w, r)
		return
	}
	spend := r.Clone(r.Context())
	spend.Header = http.Header{}
	d := &discarded{header: http.Header{}, code: http.StatusOK}
	q.next.ServeHTTP(d, spend)
	if d.code == http.StatusNotFound {
		http.NotFound(w, r)
		return
	}
	q.logger.V(2).Info("Refusing v5.channel.k8s.io as cri-streaming does", "path", r.URL.Path)
	w.WriteHeader(http.StatusForbidden)
}

func onlyV5(r *http.Request) bool {
	offered := websocket.Subprotocols(r)
	if !wsstream.IsWebSocketRequest(r) || len(offered) == 0 {
		return false
	}
	for _, p := range offered {
		if p != remotecommand.StreamProtocolV5Name {
			return false
		}
	}
	return true
}

// discarded is a response nobody reads.
type discarded struct {
	header http.Header
	code   int
}

func (d *discarded) Header() http.Header         { return d.header }
func (d *discarded) Write(b []byte) (int, error) { return len(b), nil }
func (d *discarded) WriteHeader(code int)        { d.code = code }
