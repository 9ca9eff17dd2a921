// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/proxy"
	upstream "k8s.io/apiserver/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/server"
)

const benchContainer, benchSandbox = "bench-container", "bench-sandbox"

// staticLookup is a kubelet's pod manager in miniature: the bench pod is
// always there, no CRI list calls (upstream's path makes none either).
type staticLookup struct{}

func (staticLookup) SandboxID(context.Context, cri.PodRef) (string, error) { return benchSandbox, nil }
func (staticLookup) ContainerID(context.Context, cri.PodRef, string) (string, error) {
	return benchContainer, nil
}

// kubestreamHandler is kubestream's server as a kubelet would mount it. The
// backend (cri-streaming) refuses v5, so the direct path is off: with auto
// the first session would pay one refused offer, and the figures are about
// translating.
func kubestreamHandler(c *cri.Client) (http.Handler, error) {
	return server.New(server.Config{Lookup: staticLookup{}, Runtime: c, Direct: server.DirectConfig{Mode: server.DirectNever}})
}

// kubestreamAuditHandler is the same with the audit log and terminal
// recordings on, both under dir (the bench's working directory, removed at
// the end), for what auditing costs (every session) and what a recording
// costs (tty sessions).
func kubestreamAuditHandler(c *cri.Client, dir string) (http.Handler, error) {
	w, err := audit.NewFile(klog.Background(), audit.FileOptions{Path: filepath.Join(dir, "audit.log")})
	if err != nil {
		return nil, err
	}
	return server.New(server.Config{Lookup: staticLookup{}, Runtime: c, Direct: server.DirectConfig{Mode: server.DirectNever},
		Audit: w, Recording: &server.RecordingConfig{Dir: filepath.Join(dir, "recordings")}})
}

// upstreamHandler is what a kube-apiserver (and a 1.36+ kubelet under
// ExtendWebSocketsToKubelet) runs: k8s.io/apiserver's StreamTranslatorHandler
// for exec and its TunnelingHandler for port-forward, each on a fresh CRI URL.
func upstreamHandler(c *cri.Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if strings.HasPrefix(r.URL.Path, "/portForward/") {
			u, err := c.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: benchSandbox})
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			up := proxy.NewUpgradeAwareHandler(u, nil, false, true, errResponder{})
			upstream.NewTunnelingHandler(up).ServeHTTP(w, r)
			return
		}
		opts := upstream.Options{Stdin: q.Get("input") == "1", Stdout: q.Get("output") == "1",
			Stderr: q.Get("error") == "1", Tty: q.Get("tty") == "1"}
		u, err := c.Exec(r.Context(), &runtimeapi.ExecRequest{ContainerId: benchContainer, Cmd: q["command"],
			Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.Tty})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		upstream.NewStreamTranslatorHandler(u, nil, 0, opts).ServeHTTP(w, r)
	})
}

type errResponder struct{}

func (errResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, err.Error(), http.StatusBadGateway)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
