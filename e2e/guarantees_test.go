// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
)

func assertExit(t *testing.T, err error, code int) {
	t.Helper()
	var ce exec.CodeExitError
	if code == 0 {
		if err != nil {
			t.Fatalf("want success, got %v", err)
		}
		return
	}
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("want exec.CodeExitError with code %d, got %T %v", code, err, err)
	}
}

// envInt reads a size knob: make test runs small, CI or a human large.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestStdinHalfClose is KEP-4006's reason to exist: the client closing its
// stdin must reach the process as EOF, so cat, wc and tar finish.
func TestStdinHalfClose(t *testing.T) {
	n := startNode(t)
	for _, tc := range []struct {
		cmd  []string
		in   string
		want string
	}{
		{[]string{"cat"}, "one\ntwo\n", "one\ntwo\n"},
		{[]string{"wc", "-c"}, strings.Repeat("x", 12345), "12345"},
		{[]string{"sh", "-c", "tar xf - -O"}, tarOf(t, "f.txt", "inside the tar\n"), "inside the tar\n"},
	} {
		t.Run(tc.cmd[0], func(t *testing.T) {
			done := make(chan execResult, 1)
			go func() { done <- n.exec("websocket", strings.NewReader(tc.in), tc.cmd...) }()
			select {
			case res := <-done:
				if res.err != nil || strings.TrimSpace(res.stdout) != strings.TrimSpace(tc.want) {
					t.Fatalf("got %q err %v; want %q", res.stdout, res.err, tc.want)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("command did not see EOF on stdin: the half-close was lost")
			}
		})
	}
	n.waitIdle(10 * time.Second)
}

// TestNoOutputLost runs kubernetes/kubernetes#124571's reproducer: every
// line of seq must arrive before the status, also with a slow reader.
func TestNoOutputLost(t *testing.T) {
	n := startNode(t)
	reps := envInt("KUBESTREAM_SEQ_REPS", 5)
	for i := 0; i < reps; i++ {
		res := n.exec("websocket", nil, "sh", "-c", "seq 1 2000000")
		checkSeq(t, res.stdout, 2000000)
		if res.err != nil {
			t.Fatal(res.err)
		}
	}
	t.Run("slow reader", func(t *testing.T) {
		var out slowWriter
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res := n.stream(ctx, n.execURL("exec", "demo", "app", false, false, "sh", "-c", "seq 1 300000; exit 9"),
			streamOpts{protocol: "websocket", stdout: &out})
		assertExit(t, res.err, 9)
		checkSeq(t, out.buf.String(), 300000)
	})
	n.waitIdle(10 * time.Second)
}

func checkSeq(t *testing.T, out string, last int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != last || lines[len(lines)-1] != strconv.Itoa(last) {
		t.Fatalf("got %d lines ending %q; want %d ending %d", len(lines), lines[len(lines)-1], last, last)
	}
}

// slowWriter stalls now and then, as a loaded terminal does.
type slowWriter struct {
	buf    bytes.Buffer
	writes int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes%50 == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	return w.buf.Write(p)
}

func TestExitStatus(t *testing.T) {
	n := startNode(t)
	for _, code := range []int{0, 1, 7, 255} {
		res := n.exec("websocket", nil, "sh", "-c", fmt.Sprintf("exit %d", code))
		assertExit(t, res.err, code)
	}
	t.Run("killed by a signal", func(t *testing.T) {
		res := n.exec("websocket", nil, "sh", "-c", "kill -9 $$")
		assertExit(t, res.err, 137)
	})
	t.Run("runtime error is a status with a message", func(t *testing.T) {
		res := n.exec("websocket", nil, "/no/such/binary")
		var ce exec.CodeExitError
		if res.err == nil || errors.As(res.err, &ce) || !strings.Contains(res.err.Error(), "/no/such/binary") {
			t.Fatalf("got %T %v; want a runtime error naming the binary", res.err, res.err)
		}
	})
	n.waitIdle(10 * time.Second)
}

// sizeQueue hands client-go terminal sizes.
type sizeQueue chan *remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize { return <-q }

func TestResizeAndTTY(t *testing.T) {
	n := startNode(t)
	q := make(sizeQueue, 2)
	q <- &remotecommand.TerminalSize{Width: 100, Height: 30}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The size may land a moment after the shell starts: poll for it.
	script := `for i in $(seq 100); do s=$(stty size); [ "$s" = "30 100" ] && break; sleep 0.05; done; echo "size=$s"; echo to-stderr >&2`
	res := n.stream(ctx, n.execURL("exec", "demo", "app", false, true, "sh", "-c", script),
		streamOpts{protocol: "websocket", tty: true, sizes: q})
	close(q)
	if res.err != nil || !strings.Contains(res.stdout, "size=30 100") {
		t.Fatalf("tty session: %+v", res)
	}
	// With a tty, stderr is merged into stdout, as with SPDY.
	if !strings.Contains(res.stdout, "to-stderr") {
		t.Errorf("stderr not merged into the tty: %q", res.stdout)
	}
	t.Run("without tty stdout and stderr stay apart", func(t *testing.T) {
		res := n.exec("websocket", nil, "sh", "-c", "echo out; echo err >&2")
		if res.stdout != "out\n" || res.stderr != "err\n" {
			t.Fatalf("stdout %q stderr %q", res.stdout, res.stderr)
		}
	})
	n.waitIdle(10 * time.Second)
}

// TestLargeDataBothWays pipes random data through cat and checks it byte
// for byte; KUBESTREAM_LARGE_MB=1024 makes it the 1 GiB run.
func TestLargeDataBothWays(t *testing.T) {
	n := startNode(t)
	size := envInt("KUBESTREAM_LARGE_MB", 64) << 20
	src := io.LimitReader(rand.New(rand.NewSource(1)), int64(size))
	inSum := sha256.New()
	outSum := sha256.New()
	var outLen countWriter
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res := n.stream(ctx, n.execURL("exec", "demo", "app", true, false, "cat"), streamOpts{
		protocol: "websocket", stdin: io.TeeReader(src, inSum), stdout: io.MultiWriter(outSum, &outLen)})
	if res.err != nil {
		t.Fatal(res.err)
	}
	if int(outLen) != size || !bytes.Equal(inSum.Sum(nil), outSum.Sum(nil)) {
		t.Fatalf("got %d bytes, checksum match %v; want %d identical bytes", outLen, bytes.Equal(inSum.Sum(nil), outSum.Sum(nil)), size)
	}
	n.waitIdle(10 * time.Second)
}

func tarOf(t *testing.T, name, content string) string {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content))}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte(content))
	_ = tw.Close()
	return b.String()
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// TestEitherSideEnds: a client that goes away mid-command ends the runtime
// side; a process that dies ends the client's session with its status.
func TestEitherSideEnds(t *testing.T) {
	n := startNode(t)
	t.Run("client cancels", func(t *testing.T) {
		marker := fmt.Sprintf("kubestream-cancel-%d", time.Now().UnixNano())
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		defer pw.Close()
		done := make(chan execResult, 1)
		started := &lineSignal{ch: make(chan struct{})}
		go func() {
			done <- n.stream(ctx, n.execURL("exec", "demo", "app", true, false, "sh", "-c", "echo started; cat; : "+marker),
				streamOpts{protocol: "websocket", stdin: pr, stdout: started})
		}()
		waitSignal(t, started)
		if !processRunning(marker) {
			t.Fatal("the command is not running")
		}
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("client did not return after cancel")
		}
		n.waitIdle(15 * time.Second)
		// The runtime's cat is gone too: its stdin stream was closed.
		waitFor(t, 15*time.Second, func() bool { return !processRunning(marker) })
	})
	t.Run("process killed", func(t *testing.T) {
		res := n.exec("websocket", nil, "sh", "-c", "echo before; kill -TERM $$; sleep 5")
		assertExit(t, res.err, 143)
		if res.stdout != "before\n" {
			t.Fatalf("stdout %q", res.stdout)
		}
	})
	t.Run("process killed from outside", func(t *testing.T) {
		// A unique sleep length marks the process; exec leaves no shell
		// behind to hold the output open.
		marker := strconv.Itoa(7000000 + int(time.Now().UnixNano()%1000000))
		started := &lineSignal{ch: make(chan struct{})}
		done := make(chan execResult, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done <- n.stream(ctx, n.execURL("exec", "demo", "app", false, false, "sh", "-c", "echo started; exec sleep "+marker),
				streamOpts{protocol: "websocket", stdout: started})
		}()
		waitSignal(t, started)
		// The shell may be between its echo and the exec of sleep, when
		// /proc briefly shows no command line: look again until it settles.
		var pid int
		waitFor(t, 10*time.Second, func() bool { pid = findProcess("sleep\x00" + marker); return pid != 0 })
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-done:
			assertExit(t, res.err, 137)
		case <-time.After(30 * time.Second):
			t.Fatal("exit status of a killed process never reached the client")
		}
	})
	t.Run("runtime dies", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan execResult, 1)
		started := &lineSignal{ch: make(chan struct{})}
		go func() {
			done <- n.stream(ctx, n.execURL("exec", "demo", "app", false, false, "sh", "-c", "echo started; sleep 600"),
				streamOpts{protocol: "websocket", stdout: started})
		}()
		waitSignal(t, started)
		n.killRuntime(t)
		select {
		case res := <-done:
			if res.err == nil {
				t.Fatal("want an error when the runtime dies")
			}
			var se *apierrors.StatusError
			t.Logf("client got %T: %v (status error: %v)", res.err, res.err, errors.As(res.err, &se))
		case <-time.After(30 * time.Second):
			t.Fatal("client hung after the runtime died")
		}
		n.waitIdle(15 * time.Second)
	})
}

type lineSignal struct {
	ch   chan struct{}
	once sync.Once
}

func (l *lineSignal) Write(p []byte) (int, error) {
	l.once.Do(func() { close(l.ch) })
	return len(p), nil
}

func waitSignal(t *testing.T, l *lineSignal) {
	t.Helper()
	select {
	case <-l.ch:
	case <-time.After(30 * time.Second):
		t.Fatal("no output from the command")
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processRunning looks for marker in any process's command line.
func processRunning(marker string) bool { return findProcess(marker) != 0 }

// findProcess returns the PID of a process with marker in its command line.
// Containers' processes are visible here too: the tests run on the host.
func findProcess(marker string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(marker)) {
			return pid
		}
	}
	return 0
}
