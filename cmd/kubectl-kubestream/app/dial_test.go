// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kubestream/kubestream/portmux"
)

// TestRefusal: who refused is told apart by the answer alone, through the
// apiserver: its own Status (RBAC's 403 among them), a stock kubelet's bare
// 403, a kubestream node's 403 listing what it serves.
func TestRefusal(t *testing.T) {
	const rbac = `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"p\" is forbidden: User \"u\" cannot create resource \"pods/portforward\" in API group \"\" in the namespace \"default\"","reason":"Forbidden","code":403}`
	for _, c := range []struct {
		name, body, accepted string
		code                 int
		notServed            bool
		want                 string
	}{
		{name: "the apiserver's RBAC refusal", code: 403, body: rbac, want: "cannot create resource \"pods/portforward\""},
		{name: "a stock kubelet", code: 403, notServed: true},
		{name: "a kubestream without the mode", code: 403, accepted: "v4.channel.k8s.io, SPDY/3.1+portforward.k8s.io", body: "unsupported", notServed: true},
		{name: "a kubestream node's own refusal", code: 403, accepted: portmux.ReverseProtocol, body: "refused", want: "refused"},
		{name: "a port in use", code: 409, body: "port already in use", want: "port already in use"},
	} {
		resp := &http.Response{StatusCode: c.code, Status: http.StatusText(c.code), Header: http.Header{}}
		if c.accepted != "" {
			resp.Header.Set(acceptedHeader, c.accepted)
		}
		err := refusal(resp, c.body, portmux.ReverseProtocol)
		var ns *NotServedError
		if errors.As(err, &ns) != c.notServed || !c.notServed && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestDialNamesItself: the plugin's request carries an Audit-Id of its own
// and its user agent, so the apiserver's audit and the node's join on them.
func TestDialNamesItself(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/portForward/default/demo?port=80")
	_, _ = Dial(context.Background(), &rest.Config{Host: srv.URL}, u, portmux.ReverseProtocol) // refused: only the headers count
	h := <-got
	if h.Get("Audit-Id") == "" || !strings.Contains(h.Get("User-Agent"), "/") {
		t.Fatalf("Audit-Id %q, User-Agent %q", h.Get("Audit-Id"), h.Get("User-Agent"))
	}
}
