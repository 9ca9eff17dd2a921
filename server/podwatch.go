// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

// This file is the pod watch of the port-forward modes: one check loop per
// sandbox with sessions, however many sessions it has, so the runtime is
// asked once a period per pod, not once per session.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/cri"
)

// podWatches owns the check loops, one per watched sandbox.
type podWatches struct {
	sandboxes cri.Sandboxes
	period    time.Duration
	mu        sync.Mutex
	bySandbox map[string]*podWatch
}

// podWatch is one sandbox's loop and the sessions it ends when the pod
// goes (under podWatches.mu).
type podWatch struct {
	sessions map[*context.CancelCauseFunc]struct{}
	stop     context.CancelFunc
	done     chan struct{}
}

// watch ends the session (cancel, with the reason) once sandbox is gone;
// the returned func stops watching for it, and waits for the loop when it
// was the sandbox's last session.
func (p *podWatches) watch(sandbox, pod string, cancel context.CancelCauseFunc) (unwatch func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.bySandbox[sandbox]
	if w == nil {
		ctx, stop := context.WithCancel(context.Background())
		w = &podWatch{sessions: map[*context.CancelCauseFunc]struct{}{}, stop: stop, done: make(chan struct{})}
		if p.bySandbox == nil {
			p.bySandbox = map[string]*podWatch{}
		}
		p.bySandbox[sandbox] = w
		go p.loop(ctx, sandbox, pod, w) // ends when stop is called (last unwatch) or the pod is gone
	}
	key := &cancel
	w.sessions[key] = struct{}{}
	return func() {
		p.mu.Lock()
		delete(w.sessions, key)
		last := len(w.sessions) == 0
		if last && p.bySandbox[sandbox] == w {
			delete(p.bySandbox, sandbox)
		}
		p.mu.Unlock()
		if last {
			w.stop()
			<-w.done
		}
	}
}

// loop checks the sandbox every period. A runtime that cannot answer is
// not a deleted pod: the sessions go on.
func (p *podWatches) loop(ctx context.Context, sandbox, pod string, w *podWatch) {
	defer close(w.done)
	period := p.period
	if period <= 0 {
		period = 5 * time.Second
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ready, err := p.sandboxes.SandboxReady(ctx, sandbox)
		switch {
		case err != nil:
			klog.FromContext(ctx).V(2).Info("Checking the pod of port-forward sessions failed", "pod", pod, "err", err)
		case !ready:
			p.mu.Lock()
			if p.bySandbox[sandbox] == w {
				delete(p.bySandbox, sandbox) // new sessions start a loop of their own
			}
			for c := range w.sessions {
				(*c)(fmt.Errorf("pod %s was deleted", pod))
			}
			p.mu.Unlock()
			return
		}
	}
}
