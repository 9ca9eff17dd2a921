// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/internal/wire"
)

// down copies the runtime's bytes to the client, following its frames,
// until the runtime's side ends, the client's write fails (nil) or the
// session is stopped between frames; it returns why it stopped reading.
// The start of a frame that fits the buffer waits there for its rest
// (pass), so that no write to the client waits on the runtime.
func (s *splice) down() error {
	buf := make([]byte, s.cfg.BufferSize)
	fill := 0 // buf[:fill]: a frame's start, read and not yet written
	for {
		want := buf[fill:]
		if s.armGrace() {
			if s.f.AtBoundary() {
				if err := context.Cause(s.ctx); err != nil {
					return err
				}
				return errSessionIdle
			}
			want = want[:s.f.Room(len(want))]
		}
		n, err := s.rt.Read(want)
		if n > 0 {
			var werr error
			if fill, werr = s.pass(buf, fill, n); werr != nil {
				return nil // the client is gone; nothing to tell it
			}
		}
		if err != nil {
			if wire.IsTimeout(err) && s.stopping.Load() {
				s.mu.Lock()
				woken := !s.graceArmed
				s.mu.Unlock()
				if woken {
					continue
				}
			}
			if fill > 0 && s.cw.down(buf[:fill], true) == nil {
				s.res.BytesDown += uint64(fill) // a cut frame's start goes on as it came
			}
			return err
		}
	}
}

// pass follows the n bytes read into buf[fill:] and writes what of
// buf[:fill+n] the client can have: every frame that ended, and the start
// of a frame larger than buf (it goes out in pieces as it comes). Only
// the start of a frame that fits buf waits there: holding one that cannot
// fit (a runtime writing messages of the buffer's size, header included)
// would cost an extra read and write per frame and gain nothing. It
// returns how much is left waiting, moved to buf's start.
func (s *splice) pass(buf []byte, fill, n int) (int, error) {
	data := s.f.data
	end := s.f.follow(buf[fill : fill+n])
	if s.f.data != data {
		s.activity.Add(1)
	}
	out, mid := fill+n, !s.f.AtBoundary()
	if mid && (end >= 0 || !s.cw.mid) {
		// A frame starts at start and has not ended: it waits when it fits.
		start := 0
		if end >= 0 {
			start = fill + end
		}
		if int64(out-start)+s.f.Left() <= int64(len(buf)) {
			out, mid = start, false
		}
	}
	if out == 0 {
		return fill + n, nil // the frame's rest is on its way
	}
	if err := s.cw.down(buf[:out], mid); err != nil {
		return 0, err
	}
	s.res.BytesDown += uint64(out)
	return copy(buf, buf[out:fill+n]), nil
}

// endLegacy ends a legacy session: nothing more is written down here, so
// a ping can no longer land inside a frame; cw stays the up copier's for
// its pongs (one stuck on a client that reads nothing must not hold the
// close). The client is half-closed and given a liveness window to close.
func (s *splice) endLegacy(readErr error, stopPings func()) {
	stopPings()
	if readErr != nil && s.ctx.Err() == nil && s.f.cutBeforeStatus(s.protocol) {
		// The runtime ended a v4 session without its status, which a v4
		// runtime always sends, success included: the client must not
		// read the bare close as success.
		s.res.RuntimeLost = true
		s.cw.mu.Lock()
		_ = s.client.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)) // fails only once closed; its I/O then says why
		if _, err := s.client.Write(wire.ServerFrame(nil, websocket.BinaryMessage, wire.StatusFrame(wire.InternalError(runtimeEndedMsg)))); err != nil {
			klog.FromContext(s.ctx).V(3).Info("Telling the client the runtime ended the session failed", "err", err)
		}
		s.cw.mu.Unlock()
	}
	_ = upgrade.CloseWrite(s.client)                                                   // the peer is gone already if it fails
	s.rt.Close()                                                                       // done with it: a failed close changes nothing
	_ = s.client.SetReadDeadline(time.Now().Add(s.cfg.PingPeriod + s.cfg.PongTimeout)) // fails only once closed; its I/O then says why
}

// end ends a v5 or tunnel session: when the runtime could not say why it
// ended, the node does (endFrames) between frames, with no ping in
// between; then the client gets the liveness window, not CloseGrace, to
// answer: a slow reader behind the apiserver reaches the close frame only
// after reading everything before it, pinging all the while, and closing
// on those pings would make the kernel reset what the apiserver still
// holds for it (bench-node's slow reader).
func (s *splice) end(readErr error, stopPings func()) {
	s.cw.mu.Lock() // no ping may land inside the end frames written below
	defer s.cw.mu.Unlock()
	stopPings()
	if readErr != nil && !s.f.sawClose {
		msg := "session cancelled: " + stopMessage(s.ctx)
		switch {
		case s.idled.Load() && s.ctx.Err() == nil:
			s.res.IdleTimeout = true
			msg = fmt.Sprintf("session idle for %s, closed by the node", s.cfg.IdleTimeout)
		case s.ctx.Err() == nil:
			s.res.RuntimeLost = true
			msg = "container runtime connection lost"
			if !errors.Is(readErr, io.EOF) {
				msg += ": " + readErr.Error()
			}
		}
		if s.f.AtBoundary() {
			_ = s.client.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)) // fails only once closed; its I/O then says why
			_, _ = s.client.Write(endFrames(s.protocol, msg))                 // the last words: a client that cannot take them is gone
		}
	}
	_ = upgrade.CloseWrite(s.client) // the peer is gone already if it fails
	s.closer = time.AfterFunc(s.cfg.PingPeriod+s.cfg.PongTimeout, s.closeBoth)
}

// pingClient pings the client every cfg.PingPeriod on the node's own
// behalf, as the translated route does (a WebSocket proxy or load balancer
// in front judges the connection by them; the runtime's own pings keep its
// period). A ping goes between the runtime's frames, under cw; one that
// falls due while a frame is half written is skipped, not waited for. The client's pongs go on to
// the runtime, which ignores unsolicited pongs (RFC 6455, 5.5.3). stop
// ends the pings: called with cw held, no ping is written after it
// returns.
func pingClient(client net.Conn, cw *clientWriter, cfg Config) (stop func()) {
	if cfg.PingPeriod <= 0 {
		return func() {}
	}
	var (
		mu      sync.Mutex
		stopped bool // under mu and cw
		timer   *time.Timer
	)
	ping := wire.ServerFrame(nil, websocket.PingMessage, nil)
	send := func() {
		if cw.mu.TryLock() {
			mu.Lock()
			live := !stopped
			mu.Unlock()
			if live && !cw.mid {
				// The down copy moves the deadline on only when it writes.
				_ = client.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout)) // fails only once closed; its I/O then says why
				_, _ = client.Write(ping)                                     // a failed ping is the down copy's error to find
			}
			cw.mu.Unlock()
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer.Reset(cfg.PingPeriod)
		}
	}
	mu.Lock()
	timer = time.AfterFunc(cfg.PingPeriod, send)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}

// errSessionIdle ends a spliced session the idle timeout stopped.
var errSessionIdle = errors.New("session idle")

// endFrames tell the client why its session ended when the runtime could
// not: a v5 status and a normal close, or for the tunnel (no status
// channel) a close 1011 with the reason.
func endFrames(protocol, msg string) []byte {
	if protocol == remotecommand.StreamProtocolV5Name {
		out := wire.ServerFrame(nil, websocket.BinaryMessage, wire.StatusFrame(wire.InternalError(msg)))
		return wire.ServerFrame(out, websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	}
	return wire.ServerFrame(nil, websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseInternalServerErr, wire.CloseReason(msg)))
}
