// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"context"
	"errors"

	"github.com/gorilla/websocket"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
)

// runTunnel serves port-forward over the tunnel protocol on an upgraded
// connection, until the client ends it, the server stops or it is idle:
// SPDY/3.1 portforward.k8s.io carried in WebSocket binary messages, read
// and written with kubestream's own SPDY framing (internal/spdy), not
// spdystream: no goroutine per stream, no compressor, no allocation per
// frame.
//
// Goroutines: the handler's goroutine (this one) is the client's only
// reader (pfTunnel.read): it reads frames, opens streams and pairs data with
// error streams by request ID, and copies each data frame into its
// stream's inbox. Each forwarded connection runs the runtime's PortForward
// on a goroutine of its own (forward), which reads the inbox and writes
// data frames (serialised by wire.Conn); this function waits for all of
// them before it closes.
func (s *backend) runTunnel(ws *websocket.Conn, sandbox string, logger klog.Logger) {
	wc := wire.NewConn(ws, &s.limits)
	defer wc.Shutdown()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()

	t := newTunnel(ctx, s, wc, sandbox, logger)
	wc.StartKeepalive(nil, func() {
		logger.V(2).Info("Closing idle port-forward tunnel", "idleTimeout", s.config.StreamIdleTimeout)
		wc.CloseWith(nil, websocket.CloseNormalClosure, "idle timeout")
		cancel()
	})
	// Stop, or the idle timeout: the close frame goes out (the reader then
	// sees the client's reply, or the grace deadline) and every stream ends,
	// so the runtime's copies end and a reader waiting for room goes on.
	stop := context.AfterFunc(ctx, func() {
		wc.CloseWith(nil, websocket.CloseGoingAway, "")
		t.resetAll()
	})
	defer stop()

	rerr := t.read()
	stop() // the reader ended first: the close below says why, not "going away"
	cancel()
	t.resetAll()
	t.pairs.stopAll()
	t.forwards.Wait()
	switch {
	case rerr == nil, errors.Is(rerr, errGoAway), wire.PeerClosed(rerr), wc.Closed():
		wc.CloseWith(nil, websocket.CloseNormalClosure, "")
	case errors.Is(rerr, wire.ErrProtocol), errors.Is(rerr, websocket.ErrReadLimit):
		// The WebSocket reader sent the close code.
	case errors.Is(rerr, errTunnelProtocol), errors.Is(rerr, wire.ErrNotBinary), errors.Is(rerr, spdy.ErrHeaders):
		logger.V(2).Info("Port-forward client broke the SPDY protocol", "err", rerr)
		wc.CloseWith(nil, websocket.CloseProtocolError, rerr.Error())
		wc.Drain()
	default:
		wc.CloseWith(nil, websocket.CloseNormalClosure, "")
	}
}
