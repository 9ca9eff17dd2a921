//go:build containerd

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCrictlWebSockets: crictl v1.37's WebSocket transport straight at
// containerd's streaming server (no kubelet in between). Stock containerd
// refuses it (containerd#11136); the build with kubestream's runtime-side
// server (hack/containerd.sh up 2.4-ws) serves exec and attach over v5,
// exit codes and stdin included. SPDY works on both.
func TestCrictlWebSockets(t *testing.T) {
	crictl := os.Getenv("KUBESTREAM_CRICTL")
	if crictl == "" {
		t.Fatal("KUBESTREAM_CRICTL is not set: run this with hack/containerd-e2e.sh")
	}
	native := os.Getenv("KUBESTREAM_CONTAINERD_WEBSOCKETS") == "1"
	type out struct {
		stdout, stderr string
		code           int
	}
	run := func(ctx context.Context, stdin string, args ...string) out {
		t.Helper()
		cmd := exec.CommandContext(ctx, crictl, append([]string{"--runtime-endpoint", rt.endpoint, "--timeout", "30s"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("crictl %v: %v", args, err)
		}
		return out{o.String(), e.String(), code}
	}
	id := func(name string) string {
		r := run(context.Background(), "", "ps", "-q", "--name", "^"+name+"$")
		ids := strings.Fields(r.stdout)
		if r.code != 0 || len(ids) == 0 {
			t.Fatalf("crictl ps %s: %+v", name, r)
		}
		return ids[0]
	}
	sleeper, echo := id("sleeper"), id("echo")
	before := map[string]float64{}
	if native {
		before = runtimeStreamingRequests(t)
	}

	// crictl exits 1 for any failed command and names the exit code.
	exited := func(r out, code int) bool {
		return r.code != 0 && strings.Contains(r.stderr, fmt.Sprintf("command terminated with exit code %d", code))
	}
	if r := run(context.Background(), "", "exec", "-r", "spdy", sleeper, "sh", "-c", "echo over spdy; exit 4"); !exited(r, 4) || r.stdout != "over spdy\n" {
		t.Fatalf("crictl exec -r spdy: %+v", r)
	}

	r := run(context.Background(), "", "exec", "-r", "websocket", sleeper, "sh", "-c", "echo over websocket; echo err >&2; exit 3")
	if !native {
		if r.code == 0 || !strings.Contains(r.stderr, "403") {
			t.Fatalf("crictl exec -r websocket against stock containerd: %+v; want the 403 of containerd#11136", r)
		}
		t.Logf("stock containerd refuses crictl exec -r websocket: %s", strings.TrimSpace(r.stderr))
		return
	}
	if !exited(r, 3) || r.stdout != "over websocket\n" || !strings.Contains(r.stderr, "err\n") {
		t.Fatalf("crictl exec -r websocket: %+v", r)
	}
	data := strings.Repeat("half-closed stdin ", 50000)
	if r := run(context.Background(), data, "exec", "-i", "-r", "websocket", sleeper, "wc", "-c"); r.code != 0 || strings.TrimSpace(r.stdout) != "900000" {
		t.Fatalf("crictl exec -i -r websocket wc -c: %+v", r)
	}

	// attach: the echo container answers each line; crictl keeps the
	// session after its stdin ends (the container runs on), so it is
	// stopped once the answer came.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, crictl, "--runtime-endpoint", rt.endpoint, "attach", "-i", "-r", "websocket", echo)
	pr, pw, _ := os.Pipe()
	cmd.Stdin = pr
	var o syncBuffer
	cmd.Stdout, cmd.Stderr = &o, &o
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(o.String(), "echo: over an attach") && time.Now().Before(deadline) {
		_, _ = pw.WriteString("over an attach\n")
		time.Sleep(300 * time.Millisecond)
	}
	pw.Close()
	cancel()
	_ = cmd.Wait()
	if !strings.Contains(o.String(), "echo: over an attach") {
		t.Fatalf("crictl attach -r websocket: %q", o.String())
	}

	after := runtimeStreamingRequests(t)
	if d := after["v5.channel.k8s.io"] - before["v5.channel.k8s.io"]; d != 3 {
		t.Errorf("the runtime served %v v5 sessions, want 3 (metrics %v)", d, after)
	}
}
