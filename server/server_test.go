// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubestream/kubestream/cri"
)

type fakeLookup struct{}

func (fakeLookup) SandboxID(context.Context, cri.PodRef) (string, error) { return "sb", nil }
func (fakeLookup) ContainerID(context.Context, cri.PodRef, string) (string, error) {
	return "ctr", nil
}

// fakeRuntime hands out URLs of one test server and counts them.
type fakeRuntime struct {
	base  string
	calls int
}

func (f *fakeRuntime) url(kind string) (*url.URL, error) {
	f.calls++
	return url.Parse(f.base + "/" + kind + "/token")
}
func (f *fakeRuntime) Exec(context.Context, *runtimeapi.ExecRequest) (*url.URL, error) {
	return f.url("exec")
}
func (f *fakeRuntime) Attach(context.Context, *runtimeapi.AttachRequest) (*url.URL, error) {
	return f.url("attach")
}
func (f *fakeRuntime) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*url.URL, error) {
	return f.url("portforward")
}

// runtimeLog records what a fake runtime streaming server was asked.
type runtimeLog struct {
	mu   sync.Mutex
	seen []string // "GET websocket v5.channel.k8s.io" or "POST SPDY/3.1"
}

func (l *runtimeLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.seen
	l.seen = nil
	return out
}

// TestDirectOfferRemembersRefusal: a runtime that refuses the client's
// WebSocket costs one offer, then kubestream translates with a fresh URL
// (the refused one is spent) and stops offering until the recheck period
// has passed; with Mode never it never offers.
func TestDirectOfferRemembersRefusal(t *testing.T) {
	log := &runtimeLog{}
	runtimeSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.mu.Lock()
		log.seen = append(log.seen, strings.TrimSpace(r.Method+" "+r.Header.Get("Upgrade")+" "+r.Header.Get("Sec-WebSocket-Protocol")))
		log.mu.Unlock()
		// Refuse both, as a runtime without v5 would refuse the WebSocket;
		// the SPDY refusal just ends the translated session early.
		http.Error(w, "not here", http.StatusForbidden)
	}))
	defer runtimeSrv.Close()

	for _, tc := range []struct {
		mode DirectMode
		want [][]string // per session, what the runtime saw
	}{
		{DirectAuto, [][]string{
			{"GET websocket v5.channel.k8s.io", "POST SPDY/3.1"}, // offered, refused, translated
			{"POST SPDY/3.1"}, // refusal remembered
			{"GET websocket v5.channel.k8s.io", "POST SPDY/3.1"}, // after the recheck period
		}},
		{DirectNever, [][]string{{"POST SPDY/3.1"}, {"POST SPDY/3.1"}, {"POST SPDY/3.1"}}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			rt := &fakeRuntime{base: runtimeSrv.URL}
			s, err := New(Config{Lookup: fakeLookup{}, Runtime: rt, Direct: DirectConfig{Mode: tc.mode, Recheck: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			s.direct.now = func() time.Time { return now }
			front := httptest.NewServer(s)
			defer front.Close()
			for i, want := range tc.want {
				if i == 2 {
					now = now.Add(time.Hour + time.Second)
				}
				status := v5Session(t, front.URL+"/exec/ns/pod/ctr?command=ls&output=1")
				if !strings.Contains(status, "403") {
					t.Errorf("session %d: status %q, want the runtime's 403 on the error channel", i, status)
				}
				if got := log.take(); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("session %d: runtime saw %q, want %q", i, got, want)
				}
			}
		})
	}
}

// handlerLookup says pod "sandboxed" runs on handler kata, every other pod
// on the default.
type handlerLookup struct{ fakeLookup }

func (handlerLookup) RuntimeHandler(_ context.Context, pod cri.PodRef) (string, error) {
	if pod.Name == "sandboxed" {
		return "kata", nil
	}
	return "", nil
}

// TestDirectRefusalPerHandler: a refusal is remembered for the runtime
// handler that refused, so a pod on another handler is still offered
// the WebSocket.
func TestDirectRefusalPerHandler(t *testing.T) {
	log := &runtimeLog{}
	runtimeSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.mu.Lock()
		log.seen = append(log.seen, strings.TrimSpace(r.Method+" "+r.Header.Get("Upgrade")))
		log.mu.Unlock()
		http.Error(w, "not here", http.StatusForbidden)
	}))
	defer runtimeSrv.Close()
	s, err := New(Config{Lookup: handlerLookup{}, Runtime: &fakeRuntime{base: runtimeSrv.URL}, Direct: DirectConfig{Mode: DirectAuto, Recheck: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(s)
	defer front.Close()
	for i, tc := range []struct {
		pod  string
		want string
	}{
		{"plain", "GET websocket|POST SPDY/3.1"},     // offered, refused, translated
		{"sandboxed", "GET websocket|POST SPDY/3.1"}, // another handler: offered too
		{"plain", "POST SPDY/3.1"},                   // the default handler's refusal remembered
		{"sandboxed", "POST SPDY/3.1"},               // and kata's
	} {
		v5Session(t, front.URL+"/exec/ns/"+tc.pod+"/ctr?command=ls&output=1")
		if got := strings.Join(log.take(), "|"); got != tc.want {
			t.Errorf("session %d (pod %s): runtime saw %q, want %q", i, tc.pod, got, tc.want)
		}
	}
}

// v5Session opens a v5 WebSocket and returns what arrives on the error
// channel before the server closes.
func v5Session(t *testing.T, rawURL string) string {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"v5.channel.k8s.io"}}
	ws, resp, err := d.Dial("ws"+strings.TrimPrefix(rawURL, "http"), nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer ws.Close()
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var status string
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return status
		}
		if len(msg) > 0 && msg[0] == 3 {
			status += string(msg[1:])
		}
	}
}

func decidingAuthorizer(d authorizer.Decision, err error) authorizer.Authorizer {
	return authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return d, "because", err
	})
}

// TestAuthorizerAnswers: a denial is 403 with the kubelet's text (the
// authorizer's reason is logged, as the kubelet does not tell it); an
// authorizer that cannot decide (webhook down) is a 500, not a denial.
func TestAuthorizerAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		authz  authorizer.Authorizer
		status int
		body   string
	}{
		{"deny", decidingAuthorizer(authorizer.DecisionDeny, nil), http.StatusForbidden, "Forbidden (user=system:anonymous, verb=create, resource=nodes, subresource(s)=[proxy])"},
		{"error", decidingAuthorizer(authorizer.DecisionNoOpinion, errors.New("webhook unreachable")), http.StatusInternalServerError, "Authorization error (user=system:anonymous"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Lookup: fakeLookup{}, Runtime: &fakeRuntime{base: "http://127.0.0.1:1"}, Authorizer: tc.authz})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/exec/ns/pod/ctr?command=ls&output=1", nil))
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.body) {
				t.Fatalf("%d %q; want %d containing %q", rec.Code, rec.Body.String(), tc.status, tc.body)
			}
		})
	}
}

// TestStreamingVerb: exec, attach and port-forward ask the authorizer for
// create whatever the method (a WebSocket upgrade is a GET), unless the
// operator restores the kubelet's verb by method; metrics stay get.
func TestStreamingVerb(t *testing.T) {
	for _, tc := range []struct {
		byMethod     bool
		method, path string
		want         string
	}{
		{false, http.MethodGet, "/exec/ns/pod/ctr?command=ls&output=1", "create"},
		{false, http.MethodGet, "/attach/ns/pod/ctr?output=1", "create"},
		{false, http.MethodGet, "/portForward/ns/pod", "create"},
		{false, http.MethodPost, "/exec/ns/pod/ctr?command=ls&output=1", "create"},
		{false, http.MethodGet, "/metrics", "get"},
		{true, http.MethodGet, "/exec/ns/pod/ctr?command=ls&output=1", "get"},
		{true, http.MethodPost, "/portForward/ns/pod", "create"},
	} {
		var got string
		authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			got = a.GetVerb()
			return authorizer.DecisionDeny, "", nil
		})
		s, err := New(Config{Lookup: fakeLookup{}, Runtime: &fakeRuntime{base: "http://127.0.0.1:1"}, Authorizer: authz, StreamingVerbByMethod: tc.byMethod})
		if err != nil {
			t.Fatal(err)
		}
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.path, nil))
		if got != tc.want {
			t.Errorf("%s %s (by method %v): verb %q, want %q", tc.method, tc.path, tc.byMethod, got, tc.want)
		}
	}
}

// TestRelativeStreamingURL: a runtime whose URLs carry no scheme
// (cri-dockerd's //host:port/cri/exec/…) is dialled over plain http at the
// address it named, for the direct offer and for the translation after it.
func TestRelativeStreamingURL(t *testing.T) {
	log := &runtimeLog{}
	runtimeSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.mu.Lock()
		log.seen = append(log.seen, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+r.Header.Get("Upgrade")))
		log.mu.Unlock()
		http.Error(w, "not here", http.StatusForbidden)
	}))
	defer runtimeSrv.Close()
	rt := &fakeRuntime{base: strings.TrimPrefix(runtimeSrv.URL, "http:") + "/cri"}
	s, err := New(Config{Lookup: fakeLookup{}, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(s)
	defer front.Close()
	status := v5Session(t, front.URL+"/exec/ns/pod/ctr?command=ls&output=1")
	if !strings.Contains(status, "403") {
		t.Errorf("status %q, want the runtime's 403", status)
	}
	want := []string{"GET /cri/exec/token websocket", "POST /cri/exec/token SPDY/3.1"}
	if got := log.take(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("runtime saw %q, want %q", got, want)
	}
}

// missingLookup knows no pod but "demo".
type missingLookup struct{ fakeLookup }

func (missingLookup) SandboxID(_ context.Context, pod cri.PodRef) (string, error) {
	if pod.Name != "demo" {
		return "", &cri.Error{Kind: cri.NotFound, Msg: "pod " + pod.String() + " does not exist"}
	}
	return "sb", nil
}

// TestNotAnUpgradeAnswersAsTheKubelet: a request that is no upgrade is
// answered in the kubelet's order: bad parameters 400, a pod the node
// does not have 404, then the missing upgrade 400.
func TestNotAnUpgradeAnswersAsTheKubelet(t *testing.T) {
	rt := &fakeRuntime{base: "http://127.0.0.1:1"}
	s, err := New(Config{Lookup: missingLookup{}, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, c := range []struct {
		path string
		code int
	}{
		{"/exec/default/nopod/c?command=ls&output=1", http.StatusNotFound},
		{"/attach/default/nopod/c?output=1", http.StatusNotFound},
		{"/portForward/default/nopod", http.StatusNotFound},
		{"/exec/default/nopod/c?command=ls", http.StatusBadRequest}, // no stream: the parameters first
		{"/exec/default/demo/c?command=ls&output=1", http.StatusBadRequest},
		{"/portForward/default/demo", http.StatusBadRequest},
	} {
		resp, err := http.Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("GET %s: %d, want %d", c.path, resp.StatusCode, c.code)
		}
	}
	if rt.calls != 0 {
		t.Errorf("%d streaming URLs asked of the runtime for requests that are no upgrade", rt.calls)
	}
}
