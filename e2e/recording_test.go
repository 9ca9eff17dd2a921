// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
	"github.com/kubestream/kubestream/recording"
)

func withRecordings(dir string, stdin bool) nodeOption {
	return func(o *app.ServeOptions) { o.SessionRecordingDir, o.SessionRecordingStdin = dir, stdin }
}

// castEvents reads a recording: its header and events.
func castEvents(t *testing.T, path string) (recording.Header, [][3]any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var h recording.Header
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &h) != nil {
		t.Fatalf("%s: no asciicast header", path)
	}
	var evs [][3]any
	for sc.Scan() {
		var e [3]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return h, evs
}

// TestSessionRecording: a tty session's recording replays to the bytes the
// client saw, with its size and resizes, and no stdin unless asked for; a
// recording that cannot be written does not fail the session.
func TestSessionRecording(t *testing.T) {
	dir := t.TempDir()
	recDir := filepath.Join(dir, "rec")
	n := startNode(t, withRecordings(recDir, false), withAudit(filepath.Join(dir, "audit.log")))

	// record runs script on a tty; stdin, when given, is a pipe kept open
	// until the session ends (containerd ends a tty exec whose stdin
	// closes).
	protocol := "websocket"
	record := func(t *testing.T, n *node, script, stdin string, sizes ...remotecommand.TerminalSize) execResult {
		q := make(sizeQueue, len(sizes))
		for i := range sizes {
			q <- &sizes[i]
		}
		close(q)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		o := streamOpts{protocol: protocol, tty: true, sizes: q}
		if stdin != "" {
			pr, pw := io.Pipe()
			defer pw.Close()
			go func() { _, _ = pw.Write([]byte(stdin)) }()
			o.stdin = pr
		}
		return n.stream(ctx, n.execURL("exec", "demo", "app", stdin != "", true, "sh", "-c", script), o)
	}

	replays := func(t *testing.T, n *node, dir, route string) {
		// The size may land a moment after the shell starts: wait for it;
		// then output with multi-byte characters, in several writes.
		script := `for i in $(seq 100); do s=$(stty size); [ "$s" = "40 120" ] && break; sleep 0.05; done; ` +
			`echo "size=$s"; for i in 1 2 3; do printf 'ünïcödé ✓ %s\n' $i; done`
		res := record(t, n, script, "", remotecommand.TerminalSize{Width: 100, Height: 30}, remotecommand.TerminalSize{Width: 120, Height: 40})
		if res.err != nil || !strings.Contains(res.stdout, "size=40 120") {
			t.Fatalf("tty session: %+v", res)
		}
		var end struct {
			Recording string `json:"recording"`
			AuditID   string `json:"auditID"`
		}
		waitFor(t, 10*time.Second, func() bool {
			for _, e := range auditLog(t, filepath.Join(dir, "audit.log")) {
				if e.Stage == "ResponseComplete" && e.Recording != "" && e.Route == route {
					end.Recording, end.AuditID = e.Recording, string(e.AuditID)
				}
			}
			return end.Recording != ""
		})
		h, evs := castEvents(t, end.Recording)
		if h.Version != 2 || h.Kubestream.AuditID != end.AuditID ||
			h.Kubestream.Pod != "demo" || !strings.HasPrefix(h.Command, "sh -c") || h.Kubestream.Stdin {
			t.Fatalf("header %+v (audit ID %s)", h, end.AuditID)
		}
		var out strings.Builder
		var resizes []string
		for _, e := range evs {
			switch e[1] {
			case "o":
				out.WriteString(e[2].(string))
			case "r":
				resizes = append(resizes, e[2].(string))
			case "i":
				t.Fatalf("stdin recorded without --session-recording-stdin: %v", e)
			}
		}
		if out.String() != res.stdout {
			t.Fatalf("recording replays %q, the client saw %q", out.String(), res.stdout)
		}
		// The header holds the size the terminal had when output began
		// (the last of those sent before it), the events each later one: in
		// all, a tail of the client's sizes, in order, ending at 120x40.
		sizes := append([]string{fmt.Sprintf("%dx%d", h.Width, h.Height)}, resizes...)
		if got := strings.Join(sizes, ","); !strings.HasSuffix("100x30,120x40", got) {
			t.Errorf("header %dx%d and resize events %v, want a tail of the client's 100x30, 120x40", h.Width, h.Height, resizes)
		}
		// kubestream replay plays it back; recordings lists it.
		bin := filepath.Join(dir, "kubestream")
		if b, err := exec.Command("go", "build", "-o", bin, "../cmd/kubestream").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
		played, err := exec.Command(bin, "replay", "--speed=100", end.Recording).Output()
		if err != nil || string(played) != res.stdout {
			t.Fatalf("replay: %v %q, want %q", err, played, res.stdout)
		}
		listed, err := exec.Command(bin, "recordings", recDir).Output()
		if err != nil || !strings.Contains(string(listed), end.AuditID) || !strings.Contains(string(listed), "default/demo") {
			t.Fatalf("recordings: %v\n%s", err, listed)
		}
	}

	for _, route := range []struct {
		name, protocol string
		node           func(t *testing.T, dir string) *node
	}{
		{"translated", "websocket", func(*testing.T, string) *node { return n }},
		{"proxied-spdy", "spdy", func(*testing.T, string) *node { return n }},
		{"direct", "websocket", func(t *testing.T, dir string) *node {
			return startNode(t, withWebSocketRuntime(), withRecordings(recDir, false), withAudit(filepath.Join(dir, "audit.log")))
		}},
	} {
		t.Run("replays what the client saw/"+route.name, func(t *testing.T) {
			protocol = route.protocol
			defer func() { protocol = "websocket" }()
			rdir := dir
			if route.name == "direct" {
				rdir = t.TempDir()
			}
			n := route.node(t, rdir)
			replays(t, n, rdir, route.name)
		})
	}

	t.Run("stdin when asked for", func(t *testing.T) {
		in := startNode(t, withRecordings(filepath.Join(dir, "rec-stdin"), true))
		res := record(t, in, `read x; echo got`, "typed secret\n")
		if res.err != nil {
			t.Fatal(res.err)
		}
		// The recording is whole once the node has closed the session,
		// which can be a moment after the client has its status.
		in.waitIdle(10 * time.Second)
		files, _ := filepath.Glob(filepath.Join(dir, "rec-stdin", "*.cast"))
		if len(files) != 1 {
			t.Fatalf("recordings: %v", files)
		}
		_, evs := castEvents(t, files[0])
		var typed string
		for _, e := range evs {
			if e[1] == "i" {
				typed += e[2].(string)
			}
		}
		if typed != "typed secret\n" || !strings.Contains(res.stdout, "got") {
			t.Fatalf("stdin recorded %q", typed)
		}
	})

	t.Run("an unwritable directory does not fail the session", func(t *testing.T) {
		ro := filepath.Join(dir, "file-not-dir")
		_ = os.WriteFile(ro, nil, 0o600)
		bad := startNode(t, withRecordings(ro, false))
		res := record(t, bad, `echo still served`, "")
		if res.err != nil || !strings.Contains(res.stdout, "still served") {
			t.Fatalf("session with an unwritable recording directory: %+v", res)
		}
		if got := bad.metricSum("kubestream_session_recording_failures_total", nil); got != 1 {
			t.Fatalf("recording failures counted: %v", got)
		}
		bad.waitIdle(10 * time.Second)
	})
	n.waitIdle(10 * time.Second)
}
