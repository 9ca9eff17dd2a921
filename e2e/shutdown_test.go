// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
)

// TestShutdownEndsSessions: stopping kubestream ends translated and
// relayed sessions alike, at once (a stopping kubelet exits right after),
// and the suite's leak check finds nothing left. Each client is told why,
// in the server's words (a kubelet's: it is stopping): v5 as its status,
// SPDY on its error stream, with its output streams ended so client-go
// returns at once rather than waiting for the connection to close.
func TestShutdownEndsSessions(t *testing.T) {
	const why = "the kubelet is stopping"
	n := startNode(t, func(o *app.ServeOptions) { o.ShutdownMessage = why })
	done := make(chan execResult, 2)
	for _, protocol := range []string{"websocket", "spdy"} {
		started := &lineSignal{ch: make(chan struct{})}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done <- n.stream(ctx, n.execURL("exec", "demo", "app", false, false, "sh", "-c", "echo up; exec sleep 30"),
				streamOpts{protocol: protocol, stdout: started})
		}()
		waitSignal(t, started)
	}
	start := time.Now()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		n.run.Stop()
	}()
	for range 2 {
		select {
		case res := <-done:
			took := time.Since(start)
			if res.err == nil || !strings.Contains(res.err.Error(), why) {
				t.Errorf("%s session ended with %v on shutdown; want %q", res.protocol, res.err, why)
			}
			if took > 5*time.Second { // at once, with room for a loaded machine
				t.Errorf("%s session ended %v after Stop; a stopping kubelet is gone by then", res.protocol, took)
			}
			t.Logf("%s session ended %v after Stop: %v", res.protocol, took, res.err)
		case <-time.After(20 * time.Second):
			t.Fatal("a session outlived the server's shutdown")
		}
	}
	<-stopped
}
