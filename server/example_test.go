// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/server"
)

// podManager stands in for a kubelet's pod manager: it knows its pods
// without asking the runtime.
type podManager struct{}

func (podManager) SandboxID(_ context.Context, p cri.PodRef) (string, error) {
	return "sandbox-of-" + p.Name, nil
}

func (podManager) ContainerID(_ context.Context, p cri.PodRef, c string) (string, error) {
	if p.Name != "web" {
		return "", &cri.Error{Kind: cri.NotFound, Msg: "pod " + p.String() + " not found"}
	}
	return "id-of-" + c, nil
}

// streamingRuntime stands in for the kubelet's CRI client (*cri.Client is
// one): it hands out single-use streaming URLs.
type streamingRuntime struct{}

func (streamingRuntime) Exec(context.Context, *runtimeapi.ExecRequest) (*url.URL, error) {
	return url.Parse("http://127.0.0.1:1/exec/token")
}
func (streamingRuntime) Attach(context.Context, *runtimeapi.AttachRequest) (*url.URL, error) {
	return url.Parse("http://127.0.0.1:1/attach/token")
}
func (streamingRuntime) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*url.URL, error) {
	return url.Parse("http://127.0.0.1:1/portforward/token")
}

// A kubelet builds the server from its own pod manager, CRI client,
// authenticator, authorizer and feature gate, and mounts it on its mux.
func Example() {
	srv, err := server.New(server.Config{
		Lookup:   podManager{},
		Runtime:  streamingRuntime{},
		NodeName: "node-1",
		// Authenticator and Authorizer: the kubelet's own.
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/exec/", srv)
	mux.Handle("/attach/", srv)
	mux.Handle("/portForward/", srv)

	// A request for a pod the kubelet does not have never reaches CRI.
	req := httptest.NewRequest(http.MethodGet, "/exec/default/db/main?command=ls&output=1", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Body.String())
	// Output: 404 pod default/db not found
}
