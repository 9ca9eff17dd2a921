// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/remotecommand"

	"github.com/kubestream/kubestream/internal/wire"
)

// SpliceResult is what a direct session carried and how it ended.
type SpliceResult struct {
	BytesUp, BytesDown uint64
	// RuntimeLost: the runtime's side ended without a WebSocket close; the
	// client was told so when the cut fell between frames.
	RuntimeLost bool
	// Status is the last status the runtime sent on the error channel (v5
	// and v4.channel.k8s.io; nil: none, one longer than statusMax, or a
	// protocol without one).
	Status *metav1.Status
	// IdleTimeout: the node ended the session after cfg.IdleTimeout
	// without a byte either way, and told the client so.
	IdleTimeout bool
}

// Splice carries a WebSocket session between a client and a runtime that
// speaks the client's protocol itself (kubestream's direct path). Bytes
// pass unchanged, each direction through one buffer of cfg.BufferSize. The
// runtime-to-client direction is followed frame by frame, so that a runtime
// that goes away without closing the WebSocket does not leave the client
// with a bare TCP close: between frames kubestream adds what the runtime
// should have sent — for v5 a status on the error channel, and a close
// frame (1000 after a status, 1011 for the tunnel). When ctx ends (the node
// shutting down), or no byte crossed either way for cfg.IdleTimeout (the
// kubelet's streamingConnectionIdleTimeout, which governs direct sessions
// as it does translated ones), the frame in flight is finished first,
// within cfg.CloseGrace, and the client hears why. When one side ends, the
// other gets a half-close and a liveness window (cfg.PingPeriod +
// cfg.PongTimeout) to finish its closing handshake, which a slow reader
// reaches only after reading all the output; then both connections close.
// Splice returns after both copies have.
//
// Legacy protocols (v4.channel.k8s.io and older, passed through for the
// runtime's own WebSocket server) have no end the node can speak for: their
// runtimes end every session with a bare close after the status. There the
// node adds nothing, half-closes the client and keeps reading it (and
// discarding) until the client closes or is silent for a ping period and a
// pong timeout: closing at once, with the client's pings unread, made the
// kernel reset output the slow client had yet to read.
func Splice(ctx context.Context, client, rt net.Conn, protocol string, cfg Config, obs Observer) SpliceResult {
	channels := binaryChannels(protocol)
	if !channels {
		obs = nil // nothing a recording could read
	}
	s := &splice{ctx: ctx, client: client, rt: rt, protocol: protocol, cfg: cfg,
		legacy: protocol != remotecommand.StreamProtocolV5Name && protocol != portforward.WebsocketsSPDYTunnelingPortForwardV1,
		cw:     clientWriter{conn: client, timeout: cfg.WriteTimeout},
		f:      frameFollower{channels: channels, obs: obs}}
	cf := &clientFollower{obs: obs} // the up copier's
	upDone := make(chan uint64, 1)
	if s.legacy {
		go func() { upDone <- spliceUpAnsweringPings(client, rt, &s.cw, cfg.BufferSize, cf) }()
	} else {
		go func() { upDone <- spliceUp(client, rt, cfg.BufferSize, cf, &s.activity) }()
	}
	stopPings := pingClient(client, &s.cw, cfg)
	stop := context.AfterFunc(ctx, s.wake)
	defer stop()
	if !s.legacy && cfg.IdleTimeout > 0 {
		s.watchIdle()
		defer s.stopIdle()
	}
	readErr := s.down()
	if s.legacy {
		s.endLegacy(readErr, stopPings)
	} else {
		s.end(readErr, stopPings)
	}
	s.res.BytesUp = <-upDone
	if s.closer != nil {
		s.closer.Stop()
	}
	s.closeBoth()
	if !s.legacy {
		s.res.Status = s.f.lastStatus()
	}
	return s.res
}

// splice is one spliced session: Splice's state, each piece named once.
// The down copier (Splice's own goroutine) owns f; the up copier
// (spliceUp or spliceUpAnsweringPings) shares only activity and cw.
type splice struct {
	ctx        context.Context
	client, rt net.Conn
	protocol   string
	cfg        Config
	legacy     bool // no end the node can speak for (v4.channel.k8s.io and older)

	activity atomic.Uint64 // data frames either way, for the idle timeout
	cw       clientWriter

	// Ending the session from here (the node shutting down, the idle
	// timeout) must not cut a frame in half, or the client could be told
	// nothing: the reader is woken (wake), finishes the frame in flight
	// within CloseGrace (armGrace) and then speaks for the runtime as if it
	// had gone away. mu orders the wake-up, the grace and the idle timer.
	mu         sync.Mutex
	stopping   atomic.Bool // set under mu
	graceArmed bool        // under mu
	idled      atomic.Bool
	idleTimer  *time.Timer // under mu

	f      frameFollower
	closer *time.Timer // closes both once the client's window after the end passed
	res    SpliceResult
}

func (s *splice) closeBoth() {
	s.client.Close() // done with it: a failed close changes nothing
	s.rt.Close()     // likewise
}

// wake ends the session from outside: the reader's next read returns at
// once.
func (s *splice) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping.Store(true)
	_ = s.rt.SetReadDeadline(time.Now()) // fails only once closed; its I/O then says why
}

// watchIdle wakes the session once no data frame crossed either way for
// cfg.IdleTimeout, checking on a timer (no parked goroutine).
func (s *splice) watchIdle() {
	tick := wire.IdleCheckPeriod(s.cfg.IdleTimeout, 0)
	clock := wire.NewIdleClock(time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idleTimer = time.AfterFunc(tick, func() {
		if clock.Idle(s.activity.Load(), time.Now(), s.cfg.IdleTimeout) {
			s.idled.Store(true)
			s.wake()
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.stopping.Load() {
			s.idleTimer.Reset(tick)
		}
	})
}

func (s *splice) stopIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idleTimer.Stop()
}

// armGrace reports whether the session is ending, replacing the wake-up
// deadline with the grace for the rest of the frame.
func (s *splice) armGrace() bool {
	if !s.stopping.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.graceArmed {
		s.graceArmed = true
		_ = s.rt.SetReadDeadline(time.Now().Add(s.cfg.CloseGrace)) // fails only once closed; its I/O then says why
	}
	return true
}
