// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"time"

	"github.com/gorilla/websocket"
)

// StartKeepalive pings the client every tick (calling onTick, which keeps
// the other leg alive too) and ends the session with onIdle when no data
// frame crossed it for IdleTimeout. time.AfterFunc keeps an idle session
// free of a parked goroutine.
func (c *Conn) StartKeepalive(onTick, onIdle func()) {
	clock := NewIdleClock(time.Now())
	var tick func()
	tick = func() {
		if c.closed.Load() {
			return
		}
		now := time.Now()
		if clock.Idle(c.activity.Load(), now, c.cfg.IdleTimeout) {
			onIdle()
			return
		}
		c.writeControl(websocket.PingMessage, nil, now.Add(c.cfg.WriteTimeout))
		if onTick != nil {
			onTick()
		}
		c.mu.Lock()
		if !c.closed.Load() {
			c.timer.Reset(IdleCheckPeriod(c.cfg.IdleTimeout, c.cfg.PingPeriod))
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.timer = time.AfterFunc(IdleCheckPeriod(c.cfg.IdleTimeout, c.cfg.PingPeriod), tick)
	c.mu.Unlock()
}

// IdleClock tells whether a counter of data frames stood still for a
// timeout, checked from a timer (no parked goroutine): the keepalive's and
// the direct splice's idle timeouts.
type IdleClock struct {
	last  uint64
	since time.Time
}

// NewIdleClock starts a clock at now, with nothing counted yet.
func NewIdleClock(now time.Time) IdleClock { return IdleClock{since: now} }

// Idle records the counter's value n and reports whether it has not moved
// for timeout (0: never idle).
func (c *IdleClock) Idle(n uint64, now time.Time, timeout time.Duration) bool {
	if n != c.last {
		c.last, c.since = n, now
		return false
	}
	return timeout > 0 && now.Sub(c.since) >= timeout
}

// IdleCheckPeriod is how often an idle clock is checked: period (the ping
// period; 0 for none), or a quarter of a timeout shorter than that (at
// least 50 ms), so a session ends within a quarter of its timeout, not a
// ping period later (an 8 s timeout would otherwise fire at 30 s).
func IdleCheckPeriod(timeout, period time.Duration) time.Duration {
	if q := timeout / 4; q > 0 && (period == 0 || q < period) {
		return max(q, 50*time.Millisecond)
	}
	return period
}
