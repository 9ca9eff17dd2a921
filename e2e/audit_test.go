// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/cmd/kubestream/app"
)

func withAudit(path string) nodeOption {
	return func(o *app.ServeOptions) { o.AuditLogPath = path }
}

// auditLog reads the records written so far.
func auditLog(t *testing.T, path string) []audit.Event { return jsonLines[audit.Event](t, path) }

// jsonLines reads a file of one JSON object per line (an audit log). A
// last line without its newline is a record still being written (a reader
// can see a write half done) and is left for the next read.
func jsonLines[T any](t *testing.T, path string) []T {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e T
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// sessionRecords waits for the records carrying the given Audit-Id and
// checks their shape: two (admitted, ended) with one auditID for a
// session, one for a refusal.
func sessionRecords(t *testing.T, path, auditID string, want int) []audit.Event {
	t.Helper()
	var got []audit.Event
	deadline := time.Now().Add(15 * time.Second)
	for {
		got = got[:0]
		for _, e := range auditLog(t, path) {
			if e.Correlation["Audit-Id"] == auditID {
				got = append(got, e)
			}
		}
		if len(got) >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(got) != want {
		t.Fatalf("Audit-Id %s: %d records, want %d: %+v", auditID, len(got), want, got)
	}
	if want == 2 && (got[0].Stage != audit.StageResponseStarted || got[1].Stage != audit.StageResponseComplete || got[0].AuditID != got[1].AuditID) {
		t.Fatalf("Audit-Id %s: stages %s, %s with IDs %s, %s", auditID, got[0].Stage, got[1].Stage, got[0].AuditID, got[1].AuditID)
	}
	return got
}

// TestAuditRecords: every route leaves two records per session with the
// route, protocol, command, bytes and (where the node sees it) the exit
// code, and a refused request one record with its status.
func TestAuditRecords(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, withAudit(filepath.Join(dir, "node.log")))
	d := startNode(t, withWebSocketRuntime(), withAudit(filepath.Join(dir, "direct.log")))
	exit3 := []string{"sh", "-c", "cat; echo err >&2; exit 3"}

	for _, tc := range []struct {
		name, protocol, route string
		n                     *node
		log                   string
		exitCode              bool // the node sees the status on this route
		bytes                 map[string]uint64
	}{
		{"translated", "websocket", "translated", n, "node.log", true, map[string]uint64{"stdin": 6, "stdout": 6, "stderr": 4}},
		{"direct", "websocket", "direct", d, "direct.log", true, nil},
		{"proxied-spdy", "spdy", "proxied-spdy", n, "node.log", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("audit-%s-%d", tc.name, time.Now().UnixNano())
			tc.n.headers = http.Header{"Audit-Id": {id}, "Kubectl-Command": {"kubectl exec"}}
			defer func() { tc.n.headers = nil }()
			r := tc.n.exec(tc.protocol, strings.NewReader("hello\n"), exit3...)
			assertExit(t, r.err, 3)
			recs := sessionRecords(t, filepath.Join(dir, tc.log), id, 2)
			end := recs[1]
			if end.Route != tc.route || end.ObjectRef.Subresource != "exec" || end.ObjectRef.Name != "demo" ||
				end.ObjectRef.Container != "app" || strings.Join(end.Command, " ") != strings.Join(exit3, " ") || !end.Stdin ||
				end.User.Username == "" || len(end.SourceIPs) == 0 || end.Correlation["Kubectl-Command"] != "kubectl exec" ||
				end.ResponseStatus == nil || end.ResponseStatus.Code != http.StatusSwitchingProtocols || end.DurationSeconds <= 0 {
				t.Fatalf("end record: %+v", end)
			}
			if tc.exitCode && (end.ExitCode == nil || *end.ExitCode != 3 || end.EndedBy != "runtime") {
				t.Fatalf("exit code %v ended by %q, want 3 by the runtime: %+v", end.ExitCode, end.EndedBy, end)
			}
			for ch, want := range tc.bytes {
				if end.Bytes[ch] != want {
					t.Errorf("bytes on %s: %d, want %d (%v)", ch, end.Bytes[ch], want, end.Bytes)
				}
			}
			if len(end.Bytes) == 0 {
				t.Errorf("no bytes on record: %+v", end)
			}
		})
	}

	t.Run("tunneled", func(t *testing.T) {
		id := fmt.Sprintf("audit-tunnel-%d", time.Now().UnixNano())
		n.headers = http.Header{"Audit-Id": {id}}
		defer func() { n.headers = nil }()
		local, stop := openForward(t, n, "websocket", "demo", tcpEcho(t))
		err := echoCheck(local[0], []byte("audited bytes"))
		stop()
		if err != nil {
			t.Fatal(err)
		}
		end := sessionRecords(t, filepath.Join(dir, "node.log"), id, 2)[1]
		if end.Route != "tunneled" || end.ObjectRef.Subresource != "portforward" || end.Bytes["tunnel-up"] == 0 || end.Bytes["tunnel-down"] == 0 {
			t.Fatalf("tunnel end record: %+v", end)
		}
	})

	t.Run("attach", func(t *testing.T) {
		id := fmt.Sprintf("audit-attach-%d", time.Now().UnixNano())
		n.headers = http.Header{"Audit-Id": {id}}
		defer func() { n.headers = nil }()
		if r, seen := attachEcho(n); !seen {
			t.Fatalf("no echo: %+v", r)
		}
		end := sessionRecords(t, filepath.Join(dir, "node.log"), id, 2)[1]
		if end.Route != "translated" || end.ObjectRef.Subresource != "attach" || end.ObjectRef.Container != "echo" ||
			end.Bytes["stdin"] != 7 || end.Bytes["stdout"] < uint64(len("echo: direct\n")) || end.EndedBy != "client" {
			t.Fatalf("attach end record: %+v", end)
		}
	})

	t.Run("proxied-websocket", func(t *testing.T) {
		id := fmt.Sprintf("audit-legacy-%d", time.Now().UnixNano())
		d := websocket.Dialer{TLSClientConfig: n.tlsConfig(n.certs.ClientCert, n.certs.ClientKey),
			Subprotocols: []string{"v4.channel.k8s.io"}, HandshakeTimeout: 10 * time.Second}
		c, resp, err := d.Dial(strings.Replace(n.run.URL, "https://", "wss://", 1)+"/exec/default/demo/app?command=echo&command=legacy&output=1",
			http.Header{"Audit-Id": {id}})
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, resp)
		}
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				break
			}
		}
		c.Close()
		end := sessionRecords(t, filepath.Join(dir, "node.log"), id, 2)[1]
		if end.Route != "proxied-websocket" || end.Protocol != "v4.channel.k8s.io" || end.Bytes["websocket-down"] == 0 {
			t.Fatalf("legacy end record: %+v", end)
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name, path, protocol string
			cert                 bool
			code                 int32
		}{
			{"no certificate", "/exec/default/demo/app?command=true&output=1", "v5.channel.k8s.io", false, http.StatusUnauthorized},
			{"unknown pod", "/exec/default/nosuchpod/app?command=true&output=1", "v5.channel.k8s.io", true, http.StatusNotFound},
			{"bad protocol", "/exec/default/demo/app?command=true&output=1", "v99.channel.k8s.io", true, http.StatusForbidden},
		} {
			id := fmt.Sprintf("audit-refused-%d", time.Now().UnixNano())
			hdr := wsHeaders(tc.protocol)
			hdr.Set("Audit-Id", id)
			cert, key := n.certs.ClientCert, n.certs.ClientKey
			if !tc.cert {
				cert, key = "", ""
			}
			if status, _, _ := n.rawUpgrade(http.MethodGet, tc.path, hdr, cert, key); status != int(tc.code) {
				t.Fatalf("%s: %d, want %d", tc.name, status, tc.code)
			}
			rec := sessionRecords(t, filepath.Join(dir, "node.log"), id, 1)[0]
			if rec.Stage != audit.StageResponseComplete || rec.ResponseStatus == nil || rec.ResponseStatus.Code != tc.code {
				t.Fatalf("%s: %+v", tc.name, rec)
			}
		}
	})
	n.waitIdle(10 * time.Second)
	d.waitIdle(10 * time.Second)
}
