// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
	"github.com/kubestream/kubestream/internal/pki"
	"github.com/kubestream/kubestream/refruntime"
)

// fakeAPIServer answers TokenReview (tokens maps a token to its user's
// groups) and SubjectAccessReview (allowed for system:masters, and for
// what allow lists as "user verb subresource").
func fakeAPIServer(t *testing.T, tokens map[string][]string, allow []string) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			_ = json.NewDecoder(r.Body).Decode(&tr)
			if groups, ok := tokens[tr.Spec.Token]; ok {
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
					User: authenticationv1.UserInfo{Username: "user-" + tr.Spec.Token, Groups: groups}}
			}
			_ = json.NewEncoder(w).Encode(tr)
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			_ = json.NewDecoder(r.Body).Decode(&sar)
			a := sar.Spec.ResourceAttributes
			sar.Status.Allowed = slices.Contains(sar.Spec.Groups, "system:masters") ||
				(a != nil && slices.Contains(allow, sar.Spec.User+" "+a.Verb+" "+a.Subresource))
			_ = json.NewEncoder(w).Encode(sar)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	content := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]\n"+
		"users: [{name: u, user: {token: kubestream-node}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n", srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// startFrontDoor starts kubestream node (no redirect: the host's rules are
// not the test's) before a fake kubelet that serves with the node's
// certificate and answers with what it was asked; the kubelet's
// configuration is a kubeadm node's, pointing at the test's runtime.
func startFrontDoor(t *testing.T, drain time.Duration) (*node, string) {
	t.Helper()
	certs, err := pki.WriteNodeSet(t.TempDir(), "kube-apiserver-kubelet-client")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("kubestream-node"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubelet := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer kubestream-node" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "the kubelet's %s", r.URL.Path)
	}))
	kubelet.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	kubelet.StartTLS()
	t.Cleanup(kubelet.Close)
	_, port, _ := net.SplitHostPort(kubelet.Listener.Addr().String())
	endpoint := rt.endpoint
	if endpoint == "" { // the reference backend: a runtime of the test's own
		ref, err := refruntime.Start(context.Background(), refruntime.Options{Pods: testPods})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ref.Stop)
		endpoint = ref.Endpoint()
	}
	kubeletConfig := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(kubeletConfig, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
port: %s
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true, cacheTTL: 0s}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
  webhook: {cacheAuthorizedTTL: 1ns, cacheUnauthorizedTTL: 1ns}
containerRuntimeEndpoint: %s
`, port, certs.ServerCert, certs.ServerKey, certs.CA, endpoint)), 0o600); err != nil {
		t.Fatal(err)
	}
	o := app.NewNodeOptions()
	o.KubeletConfigFile, o.KubeletTokenFile, o.NodeName = kubeletConfig, tokenFile, "node-a"
	o.Kubeconfig = fakeAPIServer(t, map[string][]string{"no-rights": nil, "stats": nil}, []string{"user-stats get stats"})
	o.Address, o.Port, o.Redirect, o.HealthzPort, o.DrainTimeout = "127.0.0.1", 0, false, 0, drain
	run, err := app.StartNode(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Stop)
	return &node{t: t, run: run, certs: certs}, kubelet.URL
}

// TestNodeFrontDoor: kubestream node serves sessions itself (client-go's
// WebSocket executor, an exit code), passes other paths to the kubelet with
// its own credential, serves its metrics at /metrics/streaming, and
// refuses what the kubelet would (a token without rights).
func TestNodeFrontDoor(t *testing.T) {
	n, _ := startFrontDoor(t, 10*time.Second)
	if r := n.exec("websocket", nil, "sh", "-c", "echo through the front door; exit 3"); r.stdout != "through the front door\n" || !strings.Contains(fmt.Sprint(r.err), "exit code 3") {
		t.Fatalf("exec: %q, %v", r.stdout, r.err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: n.tlsConfig(n.certs.ClientCert, n.certs.ClientKey)}}
	tokenClient := &http.Client{Transport: &http.Transport{TLSClientConfig: n.tlsConfig("", "")}}
	for _, c := range []struct {
		client      *http.Client
		token, path string
		code        int
		body        string
	}{
		{client, "", "/pods", 200, "the kubelet's /pods"},
		{client, "", "/stats/summary", 200, "the kubelet's /stats/summary"},
		{client, "", "/metrics/streaming", 200, "kubestream_streaming_requests_total"},
		{tokenClient, "stats", "/stats/summary", 200, "the kubelet's /stats/summary"},
		{tokenClient, "stats", "/pods", 403, "Forbidden (user=user-stats, verb=get, resource=nodes, subresource(s)=[pods proxy])"},
		{tokenClient, "no-rights", "/exec/default/demo/app?command=true&output=1", 403, "Forbidden"},
		{tokenClient, "", "/pods", 401, "Unauthorized"},
	} {
		req, _ := http.NewRequest(http.MethodGet, n.run.URL+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := c.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.body) {
			t.Errorf("GET %s (token %q): %d %q, want %d and %q", c.path, c.token, resp.StatusCode, body, c.code, c.body)
		}
	}
}

// TestNodeDrain: stopping kubestream node (a rolling update's old pod)
// closes its listener at once and lets a running session finish within
// the drain timeout: the session ends with its own exit code, not a
// message.
func TestNodeDrain(t *testing.T) {
	n, _ := startFrontDoor(t, 30*time.Second)
	stdinR, stdinW := io.Pipe()
	done := make(chan execResult, 1)
	go func() {
		done <- n.exec("websocket", stdinR, "sh", "-c", "echo started; read line; echo \"got $line\"; exit 4")
	}()
	waitFor(t, 10*time.Second, func() bool { return n.metricSum("kubestream_streaming_sessions_active", nil) == 1 })
	stopped := make(chan struct{})
	go func() {
		n.run.Stop()
		close(stopped)
	}()
	// New connections are refused once the listener is closed.
	waitFor(t, 10*time.Second, func() bool {
		c, err := net.Dial("tcp", n.run.Addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case <-stopped:
		t.Fatal("Stop returned while a session was running, before the drain timeout")
	default:
	}
	fmt.Fprintln(stdinW, "more")
	stdinW.Close()
	r := <-done
	if r.stdout != "started\ngot more\n" || !strings.Contains(fmt.Sprint(r.err), "exit code 4") {
		t.Fatalf("the session across Stop: %q, %v; want it to finish with its own exit code", r.stdout, r.err)
	}
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return after the last session ended")
	}
}
