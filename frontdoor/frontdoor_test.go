// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package frontdoor

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kubestream/kubestream/internal/pki"
)

const kubestreamToken = "kubestream-own-token"

// fakeKubelet is a TLS server that answers like the kubelet's handlers
// (no auth of its own beyond checking kubestream's token): /logs/follow
// streams lines until released, /stats/summary is large.
type fakeKubelet struct {
	*httptest.Server
	certFile  string
	release   chan struct{}
	summary   []byte
	lastAuthz chan string
}

func newFakeKubelet(t *testing.T) *fakeKubelet {
	t.Helper()
	ca, err := pki.NewCA("kubelet-self-signed")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Serving("kind-worker", net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{release: make(chan struct{}), lastAuthz: make(chan string, 100),
		certFile: filepath.Join(t.TempDir(), "kubelet.crt")}
	if err := os.WriteFile(k.certFile, pair.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	k.summary = bytes.Repeat([]byte(`{"node":"kind-worker","cpu":12345}`+"\n"), 8<<20/35)
	k.Server = httptest.NewUnstartedServer(http.HandlerFunc(k.serve))
	k.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	k.StartTLS()
	t.Cleanup(k.Close)
	return k
}

func (k *fakeKubelet) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/nosuch") {
		http.NotFound(w, r) // as the kubelet's mux, before its filter
		return
	}
	select {
	case k.lastAuthz <- r.Header.Get("Authorization"):
	default: // the tests read the first ones
	}
	if r.Header.Get("Authorization") != "Bearer "+kubestreamToken {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/logs/follow":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "first line")
		w.(http.Flusher).Flush()
		<-k.release
		fmt.Fprintln(w, "last line")
	case "/stats/summary":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(k.summary)
	default:
		fmt.Fprintf(w, "kubelet %s %s?%s", r.Method, r.URL.Path, r.URL.RawQuery)
	}
}

// Callers: who presents which token.
var testUsers = map[string]user.Info{
	"apiserver-token": &user.DefaultInfo{Name: "kube-apiserver-kubelet-client", Groups: []string{"system:masters"}},
	"stats-token":     &user.DefaultInfo{Name: "stats-reader"},
	"nothing-token":   &user.DefaultInfo{Name: "no-rights"},
}

// rbac is a small stand-in for the cluster's: the apiserver's client may
// do anything on the node; stats-reader may get nodes/stats and
// nodes/healthz; no one else anything.
type rbac struct{}

func (rbac) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch {
	case slices.Contains(a.GetUser().GetGroups(), "system:masters"):
		return authorizer.DecisionAllow, "", nil
	case a.GetUser().GetName() == "stats-reader" && a.GetVerb() == "get" &&
		(a.GetSubresource() == "stats" || a.GetSubresource() == "healthz"):
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

type streamingStub struct{ hits chan string }

func (s streamingStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits <- r.URL.Path
	w.WriteHeader(http.StatusTeapot)
}

// newFrontDoor serves a Handler in front of k; anonymousOK is the
// kubelet's authentication.anonymous.enabled.
func newFrontDoor(t *testing.T, kubeletURL, certFile string, anonymousOK bool) (string, streamingStub) {
	t.Helper()
	tokens := authenticator.TokenFunc(func(_ context.Context, tok string) (*authenticator.Response, bool, error) {
		u, ok := testUsers[tok]
		if !ok {
			return nil, false, nil
		}
		return &authenticator.Response{User: u}, true, nil
	})
	var authn authenticator.Request = bearertoken.New(tokens)
	if anonymousOK {
		authn = union.NewFailOnError(authn, anonymous.NewAuthenticator(nil))
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(kubestreamToken), 0o600); err != nil {
		t.Fatal(err)
	}
	rt, err := KubeletTransport(certFile, tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	anon, err := PinnedTransport(certFile)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(kubeletURL)
	stub := streamingStub{hits: make(chan string, 10)}
	h, err := New(Config{NodeName: "kind-worker", Streaming: stub, Own: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "kubestream_sessions_active 0\n")
	}), Kubelet: u, Transport: rt, Anonymous: anon, Authenticator: authn, Authorizer: rbac{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, stub
}

func get(t *testing.T, base, path, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestPassThroughStreamsLogsFollow(t *testing.T) {
	k := newFakeKubelet(t)
	base, _ := newFrontDoor(t, k.URL, k.certFile, false)
	req, _ := http.NewRequest(http.MethodGet, base+"/logs/follow", nil)
	req.Header.Set("Authorization", "Bearer apiserver-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The first line must arrive while the kubelet is still writing: a
	// proxy that buffered the response would hold it until the end.
	got := make(chan string, 1)
	br := bufio.NewReader(resp.Body)
	go func() {
		line, _ := br.ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if line != "first line\n" {
			t.Fatalf("first line: %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first line of a followed log did not arrive before the kubelet finished")
	}
	close(k.release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "last line\n" {
		t.Fatalf("rest: %q", rest)
	}
	if a := <-k.lastAuthz; a != "Bearer "+kubestreamToken {
		t.Fatalf("the kubelet got Authorization %q, want kubestream's own token", a)
	}
}

func TestPassThroughLargeStatsSummary(t *testing.T) {
	k := newFakeKubelet(t)
	base, _ := newFrontDoor(t, k.URL, k.certFile, false)
	resp, body := get(t, base, "/stats/summary?only_cpu_and_memory=true", "stats-token")
	if resp.StatusCode != http.StatusOK || body != string(k.summary) {
		t.Fatalf("status %d, %d bytes, want 200 and the kubelet's %d bytes", resp.StatusCode, len(body), len(k.summary))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
}

func TestPassThroughKubeletDown(t *testing.T) {
	k := newFakeKubelet(t)
	k.Close()
	base, _ := newFrontDoor(t, k.URL, k.certFile, false)
	resp, body := get(t, base, "/stats/summary", "apiserver-token")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "the kubelet at "+k.Listener.Addr().String()+" did not answer") {
		t.Fatalf("status %d body %q, want 502 saying the kubelet did not answer", resp.StatusCode, body)
	}
}

func TestPassThroughRefusesAnotherCertificate(t *testing.T) {
	k := newFakeKubelet(t)
	other := newFakeKubelet(t) // its certificate, not k's
	base, _ := newFrontDoor(t, k.URL, other.certFile, false)
	resp, body := get(t, base, "/pods", "apiserver-token")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "is not the one in") {
		t.Fatalf("status %d body %q, want 502 naming the certificate mismatch", resp.StatusCode, body)
	}
	select {
	case a := <-k.lastAuthz:
		t.Fatalf("the token went to a server whose certificate was not the kubelet's (Authorization %q)", a)
	default:
	}
}
