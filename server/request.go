// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/translator"
)

// request is what a streaming request asks for, parsed once from its path
// and query: the subresource, the pod and container, and the command and
// streams (exec, attach) or the ports (port-forward).
type request struct {
	sub       string
	pod       cri.PodRef
	container string             // exec, attach
	command   []string           // exec
	streams   translator.Options // exec, attach
	ports     []int32            // portforward
}

// parseRequest reads r as a request for sub; an error is the client's
// (400).
func parseRequest(r *http.Request, sub string) (request, error) {
	q := request{sub: sub, pod: podRef(r), container: r.PathValue("container")}
	switch sub {
	case Exec, Attach:
		opts, err := remotecommandserver.NewOptions(r)
		if err != nil {
			return request{}, err
		}
		q.streams = *opts
		if sub == Exec {
			if q.command = r.URL.Query()["command"]; len(q.command) == 0 {
				return request{}, errors.New("exec needs at least one command parameter")
			}
		}
		return q, checkNames(q.pod, q.container, true)
	default:
		ports, err := parsePorts(r.URL.Query()["port"])
		if err != nil {
			return request{}, err
		}
		q.ports = ports
		return q, checkNames(q.pod, "", false)
	}
}

// runtimeURL asks the runtime for a fresh single-use streaming URL for the
// request. A kubelet's URL source (its GetExec) passes on what the runtime
// said as it is; cri.ResolveStreamURL makes it absolute.
func (q request) runtimeURL(ctx context.Context, urls cri.URLSource) (*url.URL, error) {
	var u *url.URL
	var err error
	switch q.sub {
	case Exec:
		u, err = urls.ExecURL(ctx, q.pod, q.container, q.command, q.streams)
	case Attach:
		u, err = urls.AttachURL(ctx, q.pod, q.container, q.streams)
	default:
		u, err = urls.PortForwardURL(ctx, q.pod, q.ports)
	}
	if err != nil {
		return nil, err
	}
	return cri.ResolveStreamURL(u)
}

// logValues are the request's key/value pairs for its log lines.
func (q request) logValues() []any {
	if q.sub == PortForward {
		return []any{"subresource", q.sub, "pod", q.pod.String()}
	}
	return []any{"subresource", q.sub, "pod", q.pod.String(), "container", q.container}
}

// describe puts what was asked for on the audit record.
func (q request) describe(e *audit.Event) {
	if e == nil {
		return
	}
	switch q.sub {
	case PortForward:
		e.Ports = q.ports
	default:
		e.Command, e.TTY, e.Stdin = q.command, q.streams.TTY, q.streams.Stdin
	}
}

func podRef(r *http.Request) cri.PodRef {
	return cri.PodRef{Namespace: r.PathValue("namespace"), Name: r.PathValue("pod"), UID: r.PathValue("uid")}
}

// checkNames refuses path names no Kubernetes object can have, with a 400
// that says which, before they reach CRI (whose gRPC cannot even marshal a
// name that is not UTF-8).
func checkNames(pod cri.PodRef, container string, withContainer bool) error {
	bad := func(what, v string, errs []string) error {
		return fmt.Errorf("invalid %s %q: %s", what, v, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(pod.Namespace); len(errs) > 0 {
		return bad("namespace", pod.Namespace, errs)
	}
	if errs := validation.IsDNS1123Subdomain(pod.Name); len(errs) > 0 {
		return bad("pod name", pod.Name, errs)
	}
	if withContainer {
		if errs := validation.IsDNS1123Label(container); len(errs) > 0 {
			return bad("container name", container, errs)
		}
	}
	if pod.UID != "" && (!utf8.ValidString(pod.UID) || len(pod.UID) > 128 || strings.ContainsFunc(pod.UID, unicode.IsControl)) {
		return bad("pod UID", pod.UID, []string{"must be at most 128 printable UTF-8 characters"})
	}
	return nil
}

func parsePorts(values []string) ([]int32, error) {
	var ports []int32
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("invalid port %q: want 1-65535", p)
			}
			ports = append(ports, int32(n))
		}
	}
	return ports, nil
}
