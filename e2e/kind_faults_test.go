// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kind

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/kubestream/kubestream/internal/wiretest"
)

// faultCase is one fault a user meets, tried on every worker.
type faultCase struct {
	name string
	// assert: the workers whose result is asserted (stock's is recorded
	// as stock's, beside the others, not asserted away).
	assert map[string]bool
}

var (
	faultReset   = faultCase{"port-forward: the pod resets one connection; three more through the same kubectl", kubestreamWorkers}
	faultKill    = faultCase{"kubectl killed (SIGKILL) mid-session, no tty: the session's process 10 s later", kubestreamWorkers}
	faultKillTTY = faultCase{"kubectl killed (SIGKILL) mid-session, tty: the session's process 10 s later", kubestreamWorkers}
	faultRestart = faultCase{"the runtime (containerd, CRI-O) restarted mid-exec: kubectl's exit", kubestreamWorkers}
	faultLeft    = faultCase{"the runtime (containerd, CRI-O) restarted mid-exec: the session's process after", nativeWorkers}
)

// The workers a fault's result is asserted on: those whose kubelet runs
// kubestream, and those whose runtime runs its runtime-side server too.
var (
	kubestreamWorkers = map[string]bool{"ws": true, "skew": true, "crio": true, "daemon": true}
	nativeWorkers     = map[string]bool{"ws": true, "crio": true}
)

// faultTable collects each case's outcome by worker, for the log (and
// docs/guarantees.md, where it is kept).
type faultTable struct {
	mu   sync.Mutex
	rows map[string]map[string]string
}

func (ft *faultTable) record(t *testing.T, c faultCase, flavour, outcome string, ok bool) {
	t.Helper()
	ft.mu.Lock()
	if ft.rows[c.name] == nil {
		ft.rows[c.name] = map[string]string{}
	}
	mark := "✓ "
	if !ok {
		mark = "✗ "
	}
	ft.rows[c.name][flavour] = mark + outcome
	ft.mu.Unlock()
	t.Logf("%s on %s: %s", c.name, flavour, mark+outcome)
	if !ok && c.assert[flavour] {
		t.Errorf("%s on %s: %s", c.name, flavour, outcome)
	}
}

func (ft *faultTable) String() string {
	var b strings.Builder
	b.WriteString("| case | ws | skew | stock | crio | daemon |\n|---|---|---|---|---|---|\n")
	names := make([]string, 0, len(ft.rows))
	for name := range ft.rows {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := ft.rows[name]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name, r["ws"], r["skew"], r["stock"], r["crio"], r["daemon"])
	}
	return b.String()
}

// kindFaults: what users have long reported of streaming on real nodes,
// tried on each worker as a user would. A pod's server
// resets one forwarded connection; kubectl is killed mid-session (a laptop
// lid, a dropped VPN); containerd restarts mid-exec; a file goes in by
// `cat >`; a reader is slow; many execs run at once; kubectl cp both ways;
// the kubelet restarts mid-exec. On ws, skew and crio the connection ends alone,
// no process outlives its session, no byte is lost, and a cut session
// never reads as success (kind_bytes_test.go has the byte-keeping
// cases); stock's results are printed beside.
func kindFaults(t *testing.T, kc func(*testing.T) *controlPlane, nodes map[string]kindNode) {
	ft := &faultTable{rows: map[string]map[string]string{}}
	for _, flavour := range kindFlavours {
		t.Run(flavour, func(t *testing.T) {
			cp, n := kc(t), nodes[flavour]
			pod := kindPod(t, cp, flavour)
			faultPortForwardReset(t, cp, ft, flavour, pod)
			faultKubectlKilled(t, cp, ft, flavour, pod)
			faultRuntimeRestart(t, cp, ft, n, pod)
			faultStdinIntoFile(t, cp, ft, flavour, pod)
			faultSlowReader(t, cp, ft, flavour, pod)
			faultConcurrentExecs(t, cp, ft, flavour, pod)
			faultCopyBothWays(t, cp, ft, flavour, pod)
			faultKubeletRestart(t, cp, ft, n, pod)
			faultTTYLastOutput(t, cp, ft, flavour, pod)
			faultModesAbuse(t, cp, ft, n, pod)
		})
	}
	t.Logf("faults by worker:\n%s", ft)
}

// faultPortForwardReset: the pod's tcpreset resets the first connection
// through kubectl port-forward; three more are answered through the same
// kubectl, which is still running.
func faultPortForwardReset(t *testing.T, cp *controlPlane, ft *faultTable, flavour, pod string) {
	local, stderr := cp.portForward(t, "pod/"+pod, 9000)
	start := time.Now()
	if got, err := wiretest.LineThrough(local, wiretest.ResetLine); err == nil || got != "" {
		t.Errorf("the connection the pod reset read %q, %v", got, err)
	}
	ended := time.Since(start)
	answered := 0
	for i := range 3 {
		msg := fmt.Sprintf("after the reset %d\n", i)
		if got, err := wiretest.LineThrough(local, msg); err == nil && got == msg {
			answered++
		}
	}
	outcome := fmt.Sprintf("reset connection ended in %v; %d of 3 answered after", ended.Round(10*time.Millisecond), answered)
	if strings.Contains(stderr.String(), "lost connection to pod") {
		outcome += "; kubectl: lost connection to pod"
	}
	ft.record(t, faultReset, flavour, outcome, answered == 3)
}

// faultKubectlKilled: kubectl killed with SIGKILL during an exec, one with
// a tty (kubectl on a pty, as a terminal user runs it) and one without;
// after 10 s neither session's process is left in the container.
func faultKubectlKilled(t *testing.T, cp *controlPlane, ft *faultTable, flavour, pod string) {
	marker := func(tty bool) string { return fmt.Sprintf("kill-%s-%v", flavour, tty) }
	var started []*exec.Cmd
	for _, tty := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		script := fmt.Sprintf("while :; do echo tick %s; sleep 1; done", marker(tty))
		args := []string{"exec", "-i", pod, "-c", "app", "--", "sh", "-c", script}
		if tty {
			args = []string{"exec", "-it", pod, "-c", "app", "--", "sh", "-c", script}
		}
		cmd := cp.kubectlCmd(ctx, args...)
		var out io.Reader
		if tty {
			f, err := pty.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			out = f
		} else {
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { stdin.Close() })
			if out, err = cmd.StdoutPipe(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() && !strings.Contains(sc.Text(), "tick") {
		}
		go func() { // the pty and the pipe are drained until kubectl is gone
			for sc.Scan() {
			}
		}()
		started = append(started, cmd)
	}
	for _, cmd := range started {
		_ = cmd.Process.Kill() // SIGKILL: kubectl says nothing to anyone
		_ = cmd.Wait()
	}
	time.Sleep(10 * time.Second)
	ps := containerProcesses(t, cp, pod)
	for i, c := range []faultCase{faultKill, faultKillTTY} {
		left := strings.Contains(ps, marker(i == 1))
		outcome := "no process left"
		if left {
			outcome = "the process still runs"
		}
		ft.record(t, c, flavour, outcome, !left)
	}
}

// faultRuntimeRestart: the runtime restarted (systemctl) during a
// non-terminal exec writing every second: kubectl exits non-zero (never 0
// for a cut session), and no process of the session is left.
func faultRuntimeRestart(t *testing.T, cp *controlPlane, ft *faultTable, n kindNode, pod string) {
	marker := "restart-" + n.flavour
	cmd, _, sc, stderr := cp.startKubectl(t, true, "exec", "-i", pod, "-c", "app", "--", "sh", "-c", "while :; do echo tick "+marker+"; sleep 1; done")
	for sc.Scan() && !strings.Contains(sc.Text(), "tick") {
	}
	go func() {
		for sc.Scan() {
		}
	}()
	nodeExec(t, n, "systemctl", "restart", n.runtime())
	code := exitCode(t, cmd.Wait())
	msg := lastLine(stderr.String())
	outcome := fmt.Sprintf("exit %d: %q", code, msg)
	ok := code != 0
	if n.native() {
		ok = ok && strings.Contains(msg, "shutting down")
	}
	ft.record(t, faultRestart, n.flavour, outcome, ok)
	// The runtime is back once an exec works again.
	waitFor(t, 2*time.Minute, func() bool {
		return cp.kubectl(nil, "exec", pod, "-c", "app", "--", "true").code == 0
	})
	left := strings.Contains(containerProcesses(t, cp, pod), marker)
	outcome = "no process left"
	if left {
		outcome = "the process still runs"
	}
	ft.record(t, faultLeft, n.flavour, outcome, !left)
}

// containerProcesses lists the processes of the pod's app container
// (busybox ps: every process with its command line).
func containerProcesses(t *testing.T, cp *controlPlane, pod string) string {
	t.Helper()
	r := cp.kubectl(nil, "exec", pod, "-c", "app", "--", "ps")
	if r.code != 0 {
		t.Fatalf("ps in %s: exit %d: %s", pod, r.code, r.stderr)
	}
	return r.stdout
}
