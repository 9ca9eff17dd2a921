// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"context"
	"github.com/kubestream/kubestream/internal/wire"
	"sync"
	"time"
)

// backend is what every session takes from its server, whether served
// here or by cri-streaming: the configuration, the runtime, and the
// server's stop.
type backend struct {
	config  Config
	limits  wire.Limits // config.Limits, defaults filled, with the idle timeout
	runtime Runtime

	// ctx ends every session's runtime call when the server stops (the
	// http.Server forgets hijacked connections); calls counts them.
	ctx   context.Context
	calls runtimeCalls
}

// runtimeCalls counts the runtime calls (Exec, Attach, PortForward) the
// sessions have in flight, each once, so Stop can wait for them. A
// WaitGroup would not do: a call may begin while Stop waits.
type runtimeCalls struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0 while Stop waits
}

// run runs one runtime call, counted.
func (c *runtimeCalls) run(call func()) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.n--; c.n == 0 && c.idle != nil {
			close(c.idle)
			c.idle = nil
		}
	}()
	call()
}

// wait waits up to d for the calls in flight to return, reporting whether
// they all did.
func (c *runtimeCalls) wait(d time.Duration) bool {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return true
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}
