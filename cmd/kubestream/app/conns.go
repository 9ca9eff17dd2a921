// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/server"
)

// connGuard keeps connections that are not serving a request — new ones
// still in their TLS handshake or headers, and keep-alive ones between
// requests — from taking every descriptor: past max of them, the oldest is
// closed to admit the new one. Connections serving a request or carrying a
// session (hijacked) are never touched. Without it, ~1,000 idle
// connections under a 1,024-descriptor limit stopped all service until
// they timed out. It is http.Server.ConnState, so it runs on the server's
// goroutines and owns none.
type connGuard struct {
	max     int
	metrics *server.Metrics

	mu    sync.Mutex
	idle  map[net.Conn]uint64 // not serving a request; value: arrival order
	order uint64
}

func newConnGuard(max int, m *server.Metrics) *connGuard {
	return &connGuard{max: max, metrics: m, idle: map[net.Conn]uint64{}}
}

func (g *connGuard) connState(c net.Conn, st http.ConnState) {
	g.mu.Lock()
	var evict net.Conn
	switch st {
	case http.StateNew, http.StateIdle:
		g.order++
		g.idle[c] = g.order
		if len(g.idle) > g.max {
			oldest := ^uint64(0)
			for ic, o := range g.idle {
				if ic != c && o < oldest {
					evict, oldest = ic, o
				}
			}
			delete(g.idle, evict)
		}
	default: // active, hijacked, closed
		delete(g.idle, c)
	}
	g.mu.Unlock()
	if evict != nil {
		g.metrics.ConnectionEvicted()
		_ = evict.Close()
	}
}

// Descriptor budget: a quarter of the limit for connections not serving a
// request, a quarter in sessions (server.DefaultMaxSessions), a quarter for
// everything else (CRI, files, the runtime's own when embedded).
func idleConnBudget(limit int) int   { return max(16, limit/4) }
func idleConnTimeout() time.Duration { return 90 * time.Second } // the kubelet's IdleTimeout

// newHTTPServer is the one http.Server serve and node run: headers within
// 30 s and a whole request within readTimeout (a body that never comes is
// cut off; an upgraded connection clears the deadline when taken over);
// keep-alive connections idle for idleTimeout closed, as the kubelet's are;
// idle connections past the descriptor budget's share evicted (connGuard);
// the process's logger in every request's context.
func newHTTPServer(ctx context.Context, h http.Handler, m *server.Metrics, readTimeout, idleTimeout time.Duration) *http.Server {
	logger := klog.FromContext(ctx)
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         newConnGuard(idleConnBudget(server.DescriptorLimit()), m).connState,
		BaseContext:       func(net.Listener) context.Context { return klog.NewContext(context.Background(), logger) },
	}
}

// serveHTTP runs hs on l on a goroutine of its own, which logs an end other
// than a close; the channel closes when it has returned.
func serveHTTP(ctx context.Context, hs *http.Server, l net.Listener) <-chan struct{} {
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Serving stopped")
		}
	}()
	return served
}
