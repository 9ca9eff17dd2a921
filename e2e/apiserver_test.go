// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build apiserver

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
	"github.com/kubestream/kubestream/internal/pki"
)

// TestAPIServer runs kubectl v1.37.2 through a real kube-apiserver v1.37.2 to
// kubestream. The node object's declaredFeatures is what the apiserver
// detects: with ExtendWebSocketsToKubelet there, it passes kubectl's
// WebSocket through and kubestream translates; without, the apiserver
// translates to SPDY itself and kubestream proxies it.
func TestAPIServer(t *testing.T) {
	certs, err := pki.WriteNodeSet(t.TempDir(), "kube-apiserver-kubelet-client")
	if err != nil {
		t.Fatal(err)
	}
	nodeAudit := filepath.Join(t.TempDir(), "node-audit.log")
	n := startNodeWithCerts(t, certs, withAudit(nodeAudit))
	cp := startControlPlane(t, certs)
	cp.registerNode(n, true)
	cp.createPods()

	exec := func(t *testing.T, stdin []byte, args ...string) kubectlResult {
		t.Helper()
		var in *bytes.Reader
		if stdin != nil {
			in = bytes.NewReader(stdin)
			args = append([]string{"-i"}, args...)
		}
		args = append([]string{"exec"}, args...)
		if in == nil {
			return cp.kubectl(nil, args...)
		}
		return cp.kubectl(in, args...)
	}
	// checkExec checks what every kubectl exec user relies on.
	checkExec := func(t *testing.T) {
		r := exec(t, nil, "demo", "-c", "app", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
		if r.code != 3 || r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit 3, out, err", r.code, r.stdout, r.stderr)
		}
		// Half-closed stdin: wc only answers after EOF crossed every hop.
		data := make([]byte, 3<<20)
		_, _ = rand.Read(data)
		r = exec(t, data, "demo", "-c", "app", "--", "wc", "-c")
		if r.code != 0 || strings.TrimSpace(r.stdout) != strconv.Itoa(len(data)) {
			t.Fatalf("wc -c: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		// No stdout lost before the exit status.
		const lines = 200000
		r = exec(t, nil, "demo", "-c", "app", "--", "seq", "1", strconv.Itoa(lines))
		if r.code != 0 || r.stdout != seqOutput(lines) {
			t.Fatalf("seq: exit %d, %d bytes of stdout (want %d), stderr %q", r.code, len(r.stdout), len(seqOutput(lines)), r.stderr)
		}
	}

	// Every session the node carried for the apiserver joins exactly one
	// of the apiserver's own audit events, on both of the apiserver's
	// paths: WebSocket passed through (declared) and its own SPDY
	// translation (undeclared).
	t.Run("audit-join", func(t *testing.T) {
		since := time.Now()
		for _, declared := range []bool{true, false} {
			cp.registerNode(n, declared)
			for i := 0; i < 3; i++ {
				if r := exec(t, []byte("in\n"), "demo", "-c", "app", "--", "sh", "-c", "cat; exit 3"); r.code != 3 || r.stdout != "in\n" {
					t.Fatalf("exec: %d %q %q", r.code, r.stdout, r.stderr)
				}
			}
		}
		cp.registerNode(n, true)
		// The node's last record is written after its session counts as
		// ended, by the audit log's own writer.
		waitFor(t, 15*time.Second, func() bool {
			ended := 0
			for _, rec := range auditLog(t, nodeAudit) {
				if rec.Stage == "ResponseComplete" && !rec.RequestReceivedTimestamp.Time.Before(since) {
					ended++
				}
			}
			return ended >= 6
		})
		if joined := joinAudit(t, cp, nodeAudit, since); len(joined) != 6 {
			t.Errorf("joined %d node sessions, want 6", len(joined))
		}
		// What reaches a node (docs/audit-and-recordings.md, Audit log): kubectl's own headers
		// and X-Forwarded-For when the apiserver passes the WebSocket
		// through; nothing when it translates; never the apiserver's
		// Audit-ID.
		for _, rec := range auditLog(t, nodeAudit) {
			if rec.RequestReceivedTimestamp.Time.Before(since) || rec.Stage != "ResponseComplete" {
				continue
			}
			c := rec.Correlation
			switch {
			case c["Audit-Id"] != "":
				t.Errorf("the apiserver's Audit-ID reached the node: %v", c)
			case rec.Route == "translated" && (c["Kubectl-Session"] == "" || c["Kubectl-Command"] != "kubectl exec" || c["X-Forwarded-For"] == ""):
				t.Errorf("passed-through WebSocket without kubectl's headers: %v", c)
			case rec.Route == "proxied-spdy" && len(c) != 0:
				t.Errorf("the apiserver's own SPDY carried %v", c)
			}
		}
	})

	t.Run("declared/exec", func(t *testing.T) {
		before := n.requests("exec", "translated")
		passed := cp.apiserverMetric("apiserver_websocket_streaming_requests_total", map[string]string{"subresource": "exec", "proxy_type": "proxied_to_kubelet"})
		checkExec(t)
		if got := n.requests("exec", "translated") - before; got != 3 {
			t.Errorf("kubestream translated %v exec sessions, want 3", got)
		}
		if got := cp.apiserverMetric("apiserver_websocket_streaming_requests_total", map[string]string{"subresource": "exec", "proxy_type": "proxied_to_kubelet"}) - passed; got != 3 {
			t.Errorf("the apiserver passed %v exec WebSockets to the node, want 3", got)
		}
	})

	t.Run("declared/cp", func(t *testing.T) {
		before := n.requests("exec", "translated")
		kubectlCopy(t, cp, "demo", 5<<20+123)
		if n.requests("exec", "translated") == before {
			t.Error("kubectl cp did not reach kubestream's translator")
		}
	})

	t.Run("declared/attach", func(t *testing.T) {
		before := n.requests("attach", "translated")
		kubectlAttach(t, cp, "echo", "echo")
		if got := n.requests("attach", "translated") - before; got != 1 {
			t.Errorf("kubestream translated %v attach sessions, want 1", got)
		}
	})

	t.Run("declared/port-forward", func(t *testing.T) {
		before := n.requests("portforward", "tunneled")
		forwardAndCheck(t, cp, "pod/demo", tcpEcho(t))
		if got := n.requests("portforward", "tunneled") - before; got != 1 {
			t.Errorf("kubestream tunneled %v port-forwards, want 1", got)
		}
	})

	// A node that does not declare the feature gets SPDY from the apiserver,
	// which kubestream passes to the runtime as any kubelet would.
	t.Run("undeclared", func(t *testing.T) {
		cp.registerNode(n, false)
		defer cp.registerNode(n, true)
		spdy, tunneled := n.requests("exec", "proxied-spdy"), n.requests("exec", "translated")
		translated := cp.apiserverMetric("apiserver_websocket_streaming_requests_total", map[string]string{"subresource": "exec", "proxy_type": "translated_at_apiserver"})
		checkExec(t)
		if got := n.requests("exec", "proxied-spdy") - spdy; got != 3 {
			t.Errorf("kubestream proxied %v SPDY exec sessions, want 3", got)
		}
		if n.requests("exec", "translated") != tunneled {
			t.Error("kubestream translated although the apiserver did")
		}
		if got := cp.apiserverMetric("apiserver_websocket_streaming_requests_total", map[string]string{"subresource": "exec", "proxy_type": "translated_at_apiserver"}) - translated; got != 3 {
			t.Errorf("the apiserver translated %v exec sessions, want 3", got)
		}
		pf := n.requests("portforward", "proxied-spdy")
		forwardAndCheck(t, cp, "pod/demo", tcpEcho(t))
		if n.requests("portforward", "proxied-spdy") == pf {
			t.Error("the apiserver's SPDY port-forward did not reach kubestream")
		}
	})

	// A slow reader through the apiserver loses nothing, whichever way the
	// apiserver reaches the node: SPDY passed through (any client that
	// falls back, and every kubectl before 1.30), the client's WebSocket
	// passed through (node declared), or the apiserver's own translation
	// to SPDY (node not declared; its SPDY client pings every 5 s, so that
	// session runs longer than 5 s).
	t.Run("slow-reader", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", cp.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		q := url.Values{"container": {"app"}, "stdout": {"true"}, "stderr": {"true"}}
		execURL := func(size int) string {
			q["command"] = slowCommand(size)
			return cfg.Host + "/api/v1/namespaces/default/pods/demo/exec?" + q.Encode()
		}
		websocketExec := func(t *testing.T, size int) remotecommand.Executor {
			e, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, execURL(size))
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		for _, declared := range []bool{true, false} {
			cp.registerNode(n, declared)
			name := map[bool]string{true: "declared", false: "undeclared"}[declared]
			t.Run(name+"/spdy", func(t *testing.T) {
				before := n.requests("exec", "proxied-spdy")
				slowExec(t, spdyExecutor(t, cfg, execURL(slowReaderSize), slowPing(t)), slowReaderSize)
				if n.requests("exec", "proxied-spdy") == before {
					t.Error("the session did not reach kubestream as SPDY")
				}
			})
			size := slowReaderSize
			if !declared {
				size = 8 * slowReaderRate // 8 s: past the apiserver's first ping
			}
			t.Run(name+"/websocket", func(t *testing.T) { slowExec(t, websocketExec(t, size), size) })
		}
		cp.registerNode(n, true)
	})

	// A node that declares the feature but whose server has it off (a
	// misconfigured node, or a rollback) passes the WebSocket to the
	// runtime as an upstream kubelet without the gate does; the runtime
	// refuses v5, the apiserver relays the refusal, kubectl falls back to
	// SPDY, and the user still gets a working exec.
	t.Run("declared-but-off/fallback", func(t *testing.T) {
		off := startNodeWithCerts(t, certs, withFeature("ExtendWebSocketsToKubelet=false"))
		cp.registerNode(off, true)
		defer cp.registerNode(n, true)
		r := exec(t, nil, "demo", "-c", "app", "--", "sh", "-c", "echo fell back; exit 4")
		if r.code != 4 || r.stdout != "fell back\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit 4 and the output", r.code, r.stdout, r.stderr)
		}
		// The WebSocket went to the runtime (no route ran: it counts as
		// rejected, with the runtime's 403), then SPDY ran.
		v5Refused := off.metricSum("kubestream_streaming_requests_total",
			map[string]string{"subresource": "exec", "route": "rejected", "protocol": "v5.channel.k8s.io"})
		runtime403 := off.metricSum("kubestream_streaming_failures_total",
			map[string]string{"subresource": "exec", "route": "rejected", "code": "403"})
		if v5Refused != 1 || runtime403 != 1 || off.requests("exec", "proxied-spdy") != 1 {
			t.Errorf("node: %v v5 exec requests refused, %v with 403, %v SPDY exec requests run; want 1, 1 and 1",
				v5Refused, runtime403, off.requests("exec", "proxied-spdy"))
		}
	})
	// With --authorization-mode=Webhook the node asks the apiserver, and
	// RBAC on nodes/proxy decides: the apiserver's own kubelet client (a
	// cluster admin) passes, a user granted nodes/proxy passes, a user with
	// a valid certificate but no grant gets 403 with the reason.
	t.Run("webhook-authorization", func(t *testing.T) {
		authz := startNodeWithCerts(t, certs, withWebhookAuthz(cp.kubeconfig))
		cp.registerNode(authz, true)
		defer cp.registerNode(n, true)
		r := exec(t, nil, "demo", "-c", "app", "--", "echo", "allowed")
		if r.code != 0 || r.stdout != "allowed\n" {
			t.Fatalf("kubectl exec through the apiserver: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		ca, err := pki.LoadCA(certs.CA, certs.CAKey)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		opCert, opKey, err := ca.WriteClient(dir, "operator")
		if err != nil {
			t.Fatal(err)
		}
		inCert, inKey, err := ca.WriteClient(dir, "intruder")
		if err != nil {
			t.Fatal(err)
		}
		cp.apply(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
			"metadata": map[string]any{"name": "node-streaming"},
			"rules":    []map[string]any{{"apiGroups": []string{""}, "resources": []string{"nodes/proxy"}, "verbs": []string{"get", "create"}}}})
		cp.apply(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": "operator-node-streaming"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-streaming"},
			"subjects": []map[string]any{{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "operator"}}})
		// A monitoring agent's usual grant: get on nodes/proxy, no create.
		monCert, monKey, err := ca.WriteClient(dir, "monitoring")
		if err != nil {
			t.Fatal(err)
		}
		cp.apply(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
			"metadata": map[string]any{"name": "node-proxy-get"},
			"rules":    []map[string]any{{"apiGroups": []string{""}, "resources": []string{"nodes/proxy"}, "verbs": []string{"get"}}}})
		cp.apply(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": "monitoring-node-proxy-get"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-proxy-get"},
			"subjects": []map[string]any{{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "monitoring"}}})
		for _, c := range streamingRequests("demo", "app", "echo", "echo") {
			status, _, body := authz.rawUpgrade(c.method, c.path, c.hdr, monCert, monKey)
			if status != http.StatusForbidden || !strings.Contains(body, "verb=create") {
				t.Errorf("%s with get nodes/proxy only: %d %s, want 403 asking for create", c.name, status, body)
			}
		}
		path := "/exec/default/demo/app?command=true&output=1"
		if status, _, body := authz.rawUpgrade("GET", path, wsHeaders("v5.channel.k8s.io"), opCert, opKey); status != http.StatusSwitchingProtocols {
			t.Errorf("operator (granted nodes/proxy): %d %s, want 101", status, body)
		}
		status, _, body := authz.rawUpgrade("GET", path, wsHeaders("v5.channel.k8s.io"), inCert, inKey)
		if status != http.StatusForbidden || !strings.Contains(body, "user=intruder") {
			t.Errorf("intruder (no grant): %d %s, want 403 naming the user", status, body)
		}
		// SPDY is a POST, verb create, also granted: a whole exec with
		// client-go's SPDY executor as the operator.
		rc := &rest.Config{Host: authz.run.URL, TLSClientConfig: rest.TLSClientConfig{CertFile: opCert, KeyFile: opKey, CAFile: certs.CA}}
		var used string
		ex, err := app.NewExecutor(rc, "spdy", authz.execURL("exec", "demo", "app", false, false, "echo", "operator"), &used)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut syncBuffer
		if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}); err != nil || out.String() != "operator\n" {
			t.Errorf("operator over SPDY: %v, stdout %q", err, out.String())
		}
	})
	n.waitIdle(15 * time.Second)
}

func withWebhookAuthz(kubeconfig string) nodeOption {
	return func(o *app.ServeOptions) {
		o.Kubeconfig, o.AuthorizationMode = kubeconfig, "Webhook"
		o.WebhookCacheAuthorizedTTL, o.WebhookCacheUnauthorizedTTL = time.Second, time.Second
	}
}

// registerNode does what a kubelet does at start: a Node object whose
// status gives the apiserver its address, port and declared features.
func (cp *controlPlane) registerNode(n *node, websockets bool) {
	cp.t.Helper()
	cp.apply(map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": nodeName}})
	var features any // null removes the field in a merge patch
	if websockets {
		features = []string{"ExtendWebSocketsToKubelet"}
	}
	_, port, _ := strings.Cut(n.run.Addr, ":")
	p, _ := strconv.Atoi(port)
	cp.patchStatus("node", nodeName, map[string]any{
		"addresses":        []map[string]string{{"type": "InternalIP", "address": "127.0.0.1"}},
		"daemonEndpoints":  map[string]any{"kubeletEndpoint": map[string]int{"Port": p}},
		"declaredFeatures": features,
	})
}

// createPods mirrors the runtime's pods in the apiserver, bound to the node
// and marked running (no scheduler or kubelet runs here to do it).
func (cp *controlPlane) createPods() {
	cp.t.Helper()
	for _, p := range testPods {
		var containers, statuses []map[string]any
		for _, c := range p.Containers {
			containers = append(containers, map[string]any{"name": c.Name, "image": "busybox", "stdin": c.Stdin, "tty": c.TTY})
			statuses = append(statuses, map[string]any{"name": c.Name, "image": "busybox", "imageID": "", "ready": true,
				"restartCount": 0, "state": map[string]any{"running": map[string]any{}}})
		}
		cp.apply(map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace},
			"spec":     map[string]any{"nodeName": nodeName, "containers": containers}})
		cp.patchStatus("pod", p.Name, map[string]any{"phase": "Running", "containerStatuses": statuses,
			"conditions": []map[string]string{{"type": "Ready", "status": "True"}}})
	}
}
