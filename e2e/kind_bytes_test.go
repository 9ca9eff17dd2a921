// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kind

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sizes of the byte-keeping faults: smaller than users' (100 MiB of stdin,
// 64 MiB read slowly, 120 execs, 512 MiB copied) to keep a cold .ci/run
// under its budget, large enough for stock's losses to show.
const (
	stdinFileBytes  = 64 << 20
	kindSlowBytes   = 32 << 20
	kindSlowRate    = 2 << 20 // bytes a second
	concurrentExecs = 60
	concurrentBytes = 1 << 20
	cpBytes         = 128 << 20
	kubeletRestarts = 2
)

var (
	// The cut is the runtime's (containerd closes an exec's stdin when
	// its stdout ends): asserted where kubestream's containerd patch runs
	// (ws) and on CRI-O (which never cut it), recorded on skew and stock,
	// which run stock containerd.
	faultStdinFile = faultCase{"stdin of 64 MiB into sh -c 'cat > f': bytes in the file (on skew and stock, stock containerd's cut)", nativeWorkers}
	faultSlowRead  = faultCase{"32 MiB of stdout read at 2 MiB/s: bytes delivered, kubectl's exit", kubestreamWorkers}
	faultManyExecs = faultCase{"60 concurrent execs of 1 MiB each: sessions with every byte", kubestreamWorkers}
	faultCopy      = faultCase{"kubectl cp of 128 MiB each way: checksums", kubestreamWorkers}
	faultKubelet   = faultCase{"kubelet restarted mid-exec (twice): kubectl's exit and message", kubestreamWorkers}
	faultKubeletPs = faultCase{"kubelet restarted mid-exec: the sessions' processes after", kubestreamWorkers}
	// Where kubestream runs beside the kubelet, not in it, a kubelet
	// restart does not touch its sessions.
	faultKubeletGoesOn = faultCase{"kubelet restarted mid-exec (twice), kubestream beside it: the session goes on, and kubectl's exit is the process's", map[string]bool{"daemon": true}}
)

// faultStdinIntoFile: a file copied in by `cat >`, as users do when the
// image has no tar: the shell hands cat a stdout redirected to the file,
// so the exec's stdout ends at once while stdin goes on.
func faultStdinIntoFile(t *testing.T, cp *controlPlane, ft *faultTable, flavour, pod string) {
	data := make([]byte, stdinFileBytes)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	r := cp.kubectl(bytes.NewReader(data), "exec", "-i", pod, "-c", "app", "--", "sh", "-c", "cat > /tmp/stdin-into-file")
	got := fileSum(t, cp, pod, "/tmp/stdin-into-file")
	ok := r.code == 0 && got.sum == sha256Hex(data)
	outcome := fmt.Sprintf("%d of %d bytes, kubectl exit %d", got.size, len(data), r.code)
	if ok {
		outcome = fmt.Sprintf("every byte (sha256), exit %d", r.code)
	}
	ft.record(t, faultStdinFile, flavour, outcome, ok)
}

// faultSlowReader: kubectl's stdout read at 2 MiB/s, a terminal or a pipe
// slower than the node (kubectl#1361, kubernetes#60140).
func faultSlowReader(t *testing.T, cp *controlPlane, ft *faultTable, flavour, pod string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := cp.kubectlCmd(ctx, "exec", pod, "-c", "app", "--", "head", "-c", fmt.Sprint(kindSlowBytes), "/dev/zero")
	var stderr bytes.Buffer
	out := &rateWriter{rate: kindSlowRate}
	cmd.Stdout, cmd.Stderr = out, &stderr
	start := time.Now()
	code := exitCode(t, cmd.Run())
	n := int(out.n.Load())
	ok := n == kindSlowBytes && code == 0
	outcome := fmt.Sprintf("%d of %d bytes, exit %d", n, kindSlowBytes, code)
	if ok {
		outcome = fmt.Sprintf("every byte, exit 0, in %v", time.Since(start).Round(time.Second))
	} else if msg := lastLine(stderr.String()); msg != "" {
		outcome += fmt.Sprintf(": %q", msg)
	}
	ft.record(t, faultSlowRead, flavour, outcome, ok)
}

// faultConcurrentExecs: many execs at once, each writing 1 MiB of a known
// pattern; a session that lost or mixed up a byte shows.
func faultConcurrentExecs(t *testing.T, cp *controlPlane, ft *faultTable, flavour, pod string) {
	want := bytes.Repeat([]byte("0123456789abcdef\n"), concurrentBytes/17+1)[:concurrentBytes]
	script := fmt.Sprintf("yes 0123456789abcdef | head -c %d", concurrentBytes)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		whole    int
		failures []string
	)
	for i := range concurrentExecs {
		wg.Go(func() {
			r := cp.kubectl(nil, "exec", pod, "-c", "app", "--", "sh", "-c", script)
			mu.Lock()
			defer mu.Unlock()
			if r.code == 0 && r.stdout == string(want) {
				whole++
			} else if len(failures) < 3 {
				failures = append(failures, fmt.Sprintf("#%d: %d bytes, exit %d %q", i, len(r.stdout), r.code, lastLine(r.stderr)))
			}
		})
	}
	wg.Wait()
	outcome := fmt.Sprintf("%d of %d whole", whole, concurrentExecs)
	if len(failures) > 0 {
		outcome += "; " + strings.Join(failures, "; ")
	}
	ft.record(t, faultManyExecs, flavour, outcome, whole == concurrentExecs)
}

// faultCopyBothWays: kubectl cp into the pod and back, compared by sha256.
func faultCopyBothWays(t *testing.T, cp *controlPlane, ft *faultTable, flavour, pod string) {
	dir := t.TempDir()
	src, back := filepath.Join(dir, "in.bin"), filepath.Join(dir, "back.bin")
	data := make([]byte, cpBytes)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	want := sha256Hex(data)
	data = nil
	in := cp.kubectl(nil, "cp", src, "default/"+pod+":/tmp/cp.bin", "-c", "app")
	inSum := fileSum(t, cp, pod, "/tmp/cp.bin")
	out := cp.kubectl(nil, "cp", "default/"+pod+":/tmp/cp.bin", back, "-c", "app")
	got, err := os.ReadFile(back)
	if err != nil {
		got = nil
	}
	inOK := in.code == 0 && inSum.sum == want
	outOK := out.code == 0 && sha256Hex(got) == want
	outcome := fmt.Sprintf("in: %d bytes, exit %d, sha256 %v; out: %d bytes, exit %d, sha256 %v",
		inSum.size, in.code, match(inOK), len(got), out.code, match(outOK))
	if inOK && outOK {
		outcome = "both ways whole (sha256)"
	}
	ft.record(t, faultCopy, flavour, outcome, inOK && outOK)
	cp.kubectl(nil, "exec", pod, "-c", "app", "--", "rm", "-f", "/tmp/cp.bin", "/tmp/stdin-into-file")
}

// faultKubeletRestart: the kubelet restarted (systemctl, as an upgrade or a
// configuration change does) during an exec writing every second: kubectl
// exits non-zero and says the kubelet is stopping (told by kubestream in
// the moment the kubelet leaves before it exits: how often it arrives is
// counted), and no process of the sessions is left.
func faultKubeletRestart(t *testing.T, cp *controlPlane, ft *faultTable, n kindNode, pod string) {
	if n.flavour == "daemon" {
		faultKubeletRestartBeside(t, cp, ft, n, pod)
		return
	}
	marker := "kubelet-restart-" + n.flavour
	told, failed := 0, 0
	var last string
	for i := range kubeletRestarts {
		cmd, _, sc, stderr := cp.startKubectl(t, true, "exec", "-i", pod, "-c", "app", "--", "sh", "-c", fmt.Sprintf("while :; do echo tick %s-%d; sleep 1; done", marker, i))
		for sc.Scan() && !strings.Contains(sc.Text(), "tick") {
		}
		go func() {
			for sc.Scan() {
			}
		}()
		nodeExec(t, n, "systemctl", "restart", "kubelet")
		if exitCode(t, cmd.Wait()) != 0 {
			failed++
		}
		last = lastLine(stderr.String())
		if strings.Contains(last, "kubelet is stopping") {
			told++
		}
		// The kubelet is back once an exec through it works again.
		waitFor(t, 2*time.Minute, func() bool {
			return cp.kubectl(nil, "exec", pod, "-c", "app", "--", "true").code == 0
		})
	}
	outcome := fmt.Sprintf("%d of %d non-zero, %d of %d told the kubelet is stopping; last: %q", failed, kubeletRestarts, told, kubeletRestarts, last)
	ft.record(t, faultKubelet, n.flavour, outcome, failed == kubeletRestarts && told > 0)
	left := strings.Contains(containerProcesses(t, cp, pod), marker)
	outcome = "no process left"
	if left {
		outcome = "a process still runs"
	}
	ft.record(t, faultKubeletPs, n.flavour, outcome, !left)
}

// faultKubeletRestartBeside: on the daemon worker the kubelet restarts
// twice under an exec that kubestream node carries; the exec goes on,
// prints its last line, and kubectl exits with the process's own code.
func faultKubeletRestartBeside(t *testing.T, cp *controlPlane, ft *faultTable, n kindNode, pod string) {
	cmd, stdin, sc, stderr := cp.startKubectl(t, true, "exec", "-i", pod, "-c", "app", "--", "sh", "-c",
		"echo started; read _; echo after the restarts; exit 7")
	for sc.Scan() && sc.Text() != "started" {
	}
	for range kubeletRestarts {
		nodeExec(t, n, "systemctl", "restart", "kubelet")
		cp.must(nil, "wait", "--for=condition=Ready", "node/"+n.name, "--timeout=2m")
	}
	fmt.Fprintln(stdin, "go on")
	var rest []string
	for sc.Scan() {
		rest = append(rest, sc.Text())
	}
	code := exitCode(t, cmd.Wait())
	outcome := fmt.Sprintf("exit %d, then %q; stderr %q", code, rest, lastLine(stderr.String()))
	ft.record(t, faultKubeletGoesOn, n.flavour, outcome, code == 7 && len(rest) == 1 && rest[0] == "after the restarts")
}

func match(ok bool) string {
	if ok {
		return "matches"
	}
	return "differs"
}

// exitCode is a finished kubectl's exit code.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Fatalf("kubectl: %v", err)
	return -1
}

// lastLine is the last line of kubectl's stderr, what a user reads.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// fileSummary is a file's size and sha256 inside the pod's app container.
type fileSummary struct {
	size int
	sum  string
}

func fileSum(t *testing.T, cp *controlPlane, pod, path string) fileSummary {
	t.Helper()
	r := cp.kubectl(nil, "exec", pod, "-c", "app", "--", "sh", "-c", "wc -c < "+path+"; sha256sum "+path)
	f := strings.Fields(r.stdout)
	if r.code != 0 || len(f) < 2 {
		t.Fatalf("summing %s in %s: exit %d: %s%s", path, pod, r.code, r.stdout, r.stderr)
	}
	var s fileSummary
	fmt.Sscan(f[0], &s.size)
	s.sum = f[1]
	return s
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
