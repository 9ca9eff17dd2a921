package e2e

import (
	"context"
	"testing"
	"time"
)

// TestShutdownEndsSessions: stopping kubestream ends translated and
// passed-through sessions alike, at once, and the suite's leak check finds
// nothing left. The WebSocket client is told why; client-go's SPDY client
// takes a connection that closes without a status for success, as it does
// with any kubelet.
func TestShutdownEndsSessions(t *testing.T) {
	n := startNode(t)
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
	n.run.Stop()
	for i := 0; i < 2; i++ {
		select {
		case res := <-done:
			if res.protocol == "websocket" && res.err == nil {
				t.Errorf("WebSocket session ended without an error on shutdown")
			}
			t.Logf("%s session: %v", res.protocol, res.err)
		case <-time.After(20 * time.Second):
			t.Fatal("a session outlived the server's shutdown")
		}
	}
	t.Logf("both sessions ended %v after Stop", time.Since(start))
}
