// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/server"
)

// serveNode serves front on the node's address with SO_REUSEPORT, so that
// a rolling update's new process can listen beside the old one. Stop
// drains: the listener closes (new connections go to the other process,
// or, with the redirect gone, to the kubelet), sessions and
// passed-through requests go on for --drain-timeout, and those left are
// then ended with a message.
func (r *Running) serveNode(ctx context.Context, o *NodeOptions, front http.Handler, srv *server.Server, tlsConfig *tls.Config) error {
	logger := klog.FromContext(ctx)
	l, err := reusePortListen(ctx, net.JoinHostPort(o.Address, strconv.Itoa(o.Port)))
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	r.Addr = l.Addr().String()
	r.URL = "https://" + r.Addr
	// serve's limits (NewServeOptions), which have no flag on node.
	so := NewServeOptions()
	hs := newHTTPServer(ctx, front, srv.Metrics(), so.RequestReadTimeout, so.IdleConnectionTimeout)
	served := serveHTTP(ctx, hs, tls.NewListener(l, tlsConfig))
	r.onStop(func() {
		dctx, cancel := context.WithTimeout(context.Background(), o.DrainTimeout)
		defer cancel()
		shut := make(chan struct{})
		go func() { // closes the listener at once, then waits for requests
			defer close(shut)
			_ = hs.Shutdown(dctx)
		}()
		if err := srv.Drain(dctx); err != nil {
			logger.Info("Sessions still running at the drain timeout are ended", "drainTimeout", o.DrainTimeout)
		}
		<-shut
		_ = hs.Close()
		<-served
		sctx, cancel2 := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel2()
		if err := srv.Shutdown(sctx); err != nil {
			logger.Error(err, "Sessions did not end in time")
		}
	})
	return nil
}

// probes serves plain-HTTP /healthz (the process and its runtime) and
// /readyz (the redirect is in place and the process is not stopping) for
// the kubelet's probes, on --healthz-bind-address (loopback: they say
// nothing anyone else needs).
func (r *Running) probes(ctx context.Context, o *NodeOptions, srv *server.Server, ready *atomic.Bool) error {
	if o.HealthzPort == 0 {
		return nil
	}
	l, err := reusePortListen(ctx, net.JoinHostPort(o.HealthzAddress, strconv.Itoa(o.HealthzPort)))
	if err != nil {
		return fmt.Errorf("listening for probes: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", srv) // the server's own: the runtime answers
	mux.Handle("/livez", srv)   // the process serves (liveness must not fail with the runtime)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready: starting or stopping", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(l)
	}()
	r.onStop(func() { _ = hs.Close(); <-done })
	return nil
}
