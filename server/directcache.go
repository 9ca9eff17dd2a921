// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"sync"
	"time"
)

// DirectMode says whether a client's WebSocket may go to the runtime
// unchanged when the runtime's streaming server speaks the protocol itself.
type DirectMode string

const (
	// DirectAuto offers the WebSocket to the runtime first and translates
	// when the runtime refuses it; a refusal is remembered for
	// DirectConfig.Recheck so runtimes that never speak it (containerd and
	// CRI-O today) cost one extra CRI call per period, not per session.
	DirectAuto DirectMode = "auto"
	// DirectNever always translates.
	DirectNever DirectMode = "never"
)

// DirectConfig is the direct WebSocket CRI path's setting.
type DirectConfig struct {
	Mode    DirectMode    // DirectAuto when empty
	Recheck time.Duration // how long a refusal is remembered; 10 minutes when 0
}

// directCache remembers, per runtime handler, subresource and protocol,
// that the runtime refused the WebSocket: a node may run runc beside a
// handler whose runtime does not speak v5, and one's refusal must not turn
// the other's sessions into translations. A runtime can be upgraded under a running node, so
// a refusal expires; an acceptance needs no memory, since every attempt
// learns the answer again at no cost.
type directCache struct {
	cfg     DirectConfig
	now     func() time.Time
	mu      sync.Mutex
	refused map[string]time.Time // until when
}

func newDirectCache(cfg DirectConfig) *directCache {
	if cfg.Mode == "" {
		cfg.Mode = DirectAuto
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = 10 * time.Minute
	}
	return &directCache{cfg: cfg, now: time.Now, refused: map[string]time.Time{}}
}

func (c *directCache) auto() bool { return c.cfg.Mode == DirectAuto }

func (c *directCache) worthTrying(handler, sub, protocol string) bool {
	if c.cfg.Mode != DirectAuto {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.refused[handler+" "+sub+" "+protocol]
	return !ok || c.now().After(until)
}

func (c *directCache) remember(handler, sub, protocol string, accepted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if accepted {
		delete(c.refused, handler+" "+sub+" "+protocol)
	} else {
		c.refused[handler+" "+sub+" "+protocol] = c.now().Add(c.cfg.Recheck)
	}
}
