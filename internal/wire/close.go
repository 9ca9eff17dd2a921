// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// CloseWith writes last (if any) as the final data frame, then a close frame,
// and arms the grace deadline for the peer's close reply. It reports whether
// this call was the one that closed the session.
func (c *Conn) CloseWith(last []byte, code int, reason string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.closed.Store(true)
	if c.timer != nil {
		c.timer.Stop()
	}
	deadline := time.Now().Add(c.cfg.WriteTimeout)
	c.writeDeadline = deadline
	_ = c.nc.SetWriteDeadline(deadline) // fails only once closed; its I/O then says why
	if last != nil {
		_ = c.writeMessage(OpBinary, nil, last) // the end goes on: a peer that cannot take it is gone
	}
	_ = c.writeMessage(OpClose, nil, websocket.FormatCloseMessage(code, CloseReason(reason))) // likewise
	// The read loop sees the peer's close reply, or the grace's end. Taken
	// under rdmu, after closed is set, so no extension can undo it.
	c.rdmu.Lock()
	_ = c.nc.SetReadDeadline(time.Now().Add(c.cfg.CloseGrace)) // fails only once closed; its I/O then says why
	c.rdmu.Unlock()
	c.graceDeadline()
	return true
}

// graceDeadline moves the close grace's read deadline on while the peer is
// still reading what came before our close frame. A slow reader is not a
// dead peer: behind a proxy (the apiserver) a client reading at 1 MiB/s
// reaches our close frame half a minute after we wrote it, pinging all the
// while. Closing at CloseGrace made our kernel answer its next ping with a
// reset, and the proxy, ending both connections when ours ended, reset the
// client too, dropping what it still held for it: output lost before the
// status (bench-node's slow reader found it through kube-apiserver, 2 MB of
// 32 per session). So, checked every quarter grace:
//   - while our socket holds output the peer has not acknowledged, the
//     deadline moves on as long as that shrinks within each CloseGrace;
//   - once the peer has all of it, the connection is held open (no FIN:
//     a proxy would end the client's connection on it) until the peer's
//     close reply or its disconnect, for at most a liveness window
//     (PingPeriod + PongTimeout);
//   - a peer that takes nothing for CloseGrace is closed on, as before.
//
// Where the kernel cannot tell (not Linux, not TCP) the grace is
// CloseGrace alone. A time.AfterFunc chain, no goroutine, ends with the
// read side (Shutdown) or the grace.
func (c *Conn) graceDeadline() {
	tcp := rawTCP(c.nc)
	if tcp == nil {
		return
	}
	queued, progress := unacked(tcp), time.Now()
	if queued < 0 {
		return
	}
	step := max(c.cfg.CloseGrace/4, time.Millisecond)
	window := c.cfg.PingPeriod + c.cfg.PongTimeout
	var emptySince time.Time
	var tick func()
	tick = func() {
		if c.shut.Load() {
			return
		}
		now := time.Now()
		q := unacked(tcp)
		if q < queued {
			progress = now
		}
		queued = q
		if q == 0 && emptySince.IsZero() {
			emptySince = now
		}
		live := now.Sub(progress) < c.cfg.CloseGrace
		if q == 0 {
			live = now.Sub(emptySince) < window
		}
		if !live {
			return // the deadline last set runs out
		}
		c.rdmu.Lock()
		_ = c.nc.SetReadDeadline(now.Add(c.cfg.CloseGrace)) // fails only once closed; its I/O then says why
		c.rdmu.Unlock()
		time.AfterFunc(step, tick)
	}
	time.AfterFunc(step, tick)
}

// rawTCP is the TCP connection under conn (and its TLS), or nil.
func rawTCP(conn net.Conn) *net.TCPConn {
	if t, ok := conn.(*tls.Conn); ok {
		conn = t.NetConn()
	}
	tcp, _ := conn.(*net.TCPConn)
	return tcp
}

// Drain discards what the peer still sends until its close frame, its
// disconnect or the grace deadline CloseWith set, whichever is first, so
// closing the socket cannot reset data the peer has yet to read (our status
// and close frame among it). After the read limit trips, or the framing
// broke, messages cannot be told apart any more, so the raw connection is
// drained instead. The grace is graceDeadline's: longer for a peer that
// is still taking our output.
func (c *Conn) Drain() {
	for {
		_, _, err := c.NextReader()
		if err == nil {
			continue
		}
		if errors.Is(err, websocket.ErrReadLimit) || errors.Is(err, ErrProtocol) {
			_, _ = io.Copy(io.Discard, c.nc) // draining until the peer goes: its error is that end
		}
		return
	}
}

// Shutdown closes the TCP connection after the read loop ended or the grace
// period passed, whichever is first.
func (c *Conn) Shutdown() {
	c.shut.Store(true)
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.closed.Store(true)
	c.mu.Unlock()
	_ = c.nc.Close() // done with it: a failed close changes nothing
}

// CloseReason cuts a close frame's reason to what a control frame can carry
// (125 bytes, 2 of them the code) at a UTF-8 boundary, so the peer's
// reader, which must check it is UTF-8, does not fail on our own cut.
func CloseReason(reason string) string {
	const max = 123
	if len(reason) <= max {
		return reason
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut]
}

// IsTimeout reports whether err is a deadline's timeout (a net.Error's).
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// PeerClosed reports whether a read error is the peer's close frame (a
// normal end), as opposed to a broken connection.
func PeerClosed(err error) bool {
	var ce *websocket.CloseError
	return errors.As(err, &ce)
}
