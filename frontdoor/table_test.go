// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package frontdoor

import (
	"net/http"
	"slices"
	"testing"

	"github.com/kubestream/kubestream/server"
)

// kubeletPaths are the kubelet v1.37 API's paths with the subresources of
// nodes its filter authorizes each against (pkg/kubelet/server: auth.go's
// mapping), written out here rather than derived from Attributes, so that
// the table checks the mapping instead of restating it.
var kubeletPaths = []struct {
	method, path string
	subresources []string
}{
	{"GET", "/pods", []string{"pods", "proxy"}},
	{"GET", "/runningpods/", []string{"pods", "proxy"}},
	{"GET", "/allocatedPods", []string{"pods", "proxy"}},
	{"GET", "/healthz", []string{"healthz", "proxy"}},
	{"GET", "/healthz/syncloop", []string{"healthz", "proxy"}},
	{"GET", "/configz", []string{"configz", "proxy"}},
	{"GET", "/flagz", []string{"configz"}},
	{"GET", "/statusz", []string{"statusz"}},
	{"GET", "/stats/summary", []string{"stats"}},
	{"GET", "/metrics", []string{"metrics"}},
	{"GET", "/metrics/cadvisor", []string{"metrics"}},
	{"GET", "/metrics/resource", []string{"metrics"}},
	{"GET", "/metrics/probes", []string{"metrics"}},
	{"GET", OwnMetricsPath, []string{"metrics"}},
	{"GET", "/logs/", []string{"log"}},
	{"GET", "/logs/syslog", []string{"log"}},
	{"GET", "/containerLogs/default/web/app", []string{"proxy"}},
	{"POST", "/checkpoint/default/web/app", []string{"checkpoint"}},
	{"POST", "/run/default/web/app", []string{"proxy"}},
	{"GET", "/debug/pprof/", []string{"proxy"}},
	{"PUT", "/debug/flags/v", []string{"proxy"}},
	{"GET", "/stats", []string{"stats"}}, // isSubpath trims the prefix's slash
	{"GET", "/statsx", []string{"proxy"}},
	{"GET", "/nosuchpath", []string{"proxy"}},
}

func TestAttributesAreTheKubelets(t *testing.T) {
	for _, p := range kubeletPaths {
		r, _ := http.NewRequest(p.method, "https://node"+p.path, nil)
		var got []string
		for _, a := range Attributes("kind-worker", testUsers["nothing-token"], r) {
			if a.GetResource() != "nodes" || a.GetName() != "kind-worker" || a.GetVerb() != server.Verb(p.method) || a.GetAPIVersion() != "v1" || !a.IsResourceRequest() {
				t.Errorf("%s %s: attributes %+v", p.method, p.path, a)
			}
			got = append(got, a.GetSubresource())
		}
		if !slices.Equal(got, p.subresources) {
			t.Errorf("%s %s: subresources %v, the kubelet's are %v", p.method, p.path, got, p.subresources)
		}
	}
}

// TestAuthorizationTable: every kubelet path × caller answers as the
// kubelet's filter would with the same authenticator and authorizer: 401
// for no credential (anonymous off) or a token no one knows, 403 for a
// caller whose rights cover none of the path's subresources, and the
// kubelet's (or kubestream's streaming server's) own answer otherwise.
func TestAuthorizationTable(t *testing.T) {
	k := newFakeKubelet(t)
	close(k.release)
	strict, _ := newFrontDoor(t, k.URL, k.certFile, false)
	open, _ := newFrontDoor(t, k.URL, k.certFile, true)
	allowed := map[string][]string{ // the test RBAC (rbac) as subresources a caller may get
		"apiserver-token": {"*"},
		"stats-token":     {"stats", "healthz"},
	}
	for _, p := range kubeletPaths {
		for _, c := range []struct{ name, base, token string }{
			{"apiserver", strict, "apiserver-token"},
			{"stats-reader", strict, "stats-token"},
			{"no-rights", strict, "nothing-token"},
			{"unknown-token", strict, "forged"},
			{"anonymous", strict, ""},
			{"anonymous-enabled", open, ""},
		} {
			want := http.StatusForbidden
			switch {
			case p.path == "/nosuchpath": // the kubelet's 404 comes before it authenticates
				want = http.StatusNotFound
			case c.token == "forged" || (c.token == "" && c.base == strict):
				want = http.StatusUnauthorized
			case slices.Contains(allowed[c.token], "*"):
				want = http.StatusOK
			case p.method == "GET" && slices.ContainsFunc(p.subresources, func(s string) bool { return slices.Contains(allowed[c.token], s) }):
				want = http.StatusOK
			}
			req, _ := http.NewRequest(p.method, c.base+p.path, nil)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s %s as %s: %d, want %d", p.method, p.path, c.name, resp.StatusCode, want)
			}
		}
	}
}

// TestStreamingPathsGoToKubestream: the shapes kubestream's server routes
// go to it (which authorizes them itself); any other shape goes to the
// kubelet through the guard.
func TestStreamingPathsGoToKubestream(t *testing.T) {
	k := newFakeKubelet(t)
	close(k.release)
	base, stub := newFrontDoor(t, k.URL, k.certFile, false)
	for path, streaming := range map[string]bool{
		"/exec/default/web/app":            true,
		"/exec/default/web/uid-1/app":      true,
		"/attach/default/web/app":          true,
		"/portForward/default/web":         true,
		"/portForward/default/web/uid-1":   true,
		"/exec/default/web":                false,
		"/exec/default//app":               false,
		"/portForward/default/web/uid/x/y": false,
		"/execute/default/web/app":         false,
	} {
		resp, _ := get(t, base, path, "")
		switch {
		case streaming && resp.StatusCode != http.StatusTeapot:
			t.Errorf("%s: %d, want kubestream's streaming server", path, resp.StatusCode)
		case !streaming && resp.StatusCode != http.StatusUnauthorized:
			t.Errorf("%s: %d, want the guard's 401 on the way to the kubelet", path, resp.StatusCode)
		}
		if streaming {
			if got := <-stub.hits; got != path {
				t.Errorf("streaming server got %s, want %s", got, path)
			}
		}
	}
}
