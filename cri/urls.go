// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// Streams are the streams of a remotecommand session, as the kubelet API
// request names them and the CRI request must repeat them. One type serves
// the whole path: cri-streaming's, which parses them from the request.
type Streams = remotecommandserver.Options

// URLSource turns a kubelet API request into a runtime streaming URL; each
// call returns a fresh single-use one. ByLookup is the standalone source; a
// kubelet passes one built on its own GetExec, GetAttach and GetPortForward,
// which already know its pods (see hack/kube/kubelet). Errors should be
// *Error (Classify turns a runtime's gRPC error into one) so the client gets
// the right HTTP status.
type URLSource interface {
	ExecURL(ctx context.Context, pod PodRef, container string, cmd []string, s Streams) (*url.URL, error)
	AttachURL(ctx context.Context, pod PodRef, container string, s Streams) (*url.URL, error)
	PortForwardURL(ctx context.Context, pod PodRef, ports []int32) (*url.URL, error)
}

// PodSource is a URLSource that can tell whether a pod exists on the node
// without asking for a URL: the kubelet looks a pod up before it looks at
// the request's upgrade, so a request it would refuse either way is a 404
// for a pod it does not have. Optional: without it such requests get the
// upgrade's 400.
type PodSource interface {
	PodExists(ctx context.Context, pod PodRef) error
}

// HandlerSource is a URLSource that can tell which runtime handler serves a
// pod (a node may run runc beside a sandboxed runtime, and one may speak
// WebSockets where the other does not). Optional: without it every pod
// counts as one handler.
type HandlerSource interface {
	RuntimeHandler(ctx context.Context, pod PodRef) (string, error)
}

// ResolveStreamURL makes a runtime's streaming URL one that can be dialled,
// as the kubelet's pass-through always has (apimachinery's proxy takes a
// missing scheme for http). cri-dockerd's URLs are scheme-relative,
// //[::]:port/cri/exec/…: its streaming server's address with no scheme;
// kubelet 1.36's translator dialled them as https and broke kubectl exec
// (cri-dockerd#569). A URL with no host, or another scheme, is the
// runtime's error.
func ResolveStreamURL(u *url.URL) (*url.URL, error) {
	if u.Host == "" || (u.Scheme != "" && u.Scheme != "http" && u.Scheme != "https") {
		return nil, &Error{Kind: Internal, Msg: fmt.Sprintf("container runtime returned an unusable streaming URL %q (want http or https with a host)", u.String())}
	}
	if u.Scheme == "" {
		r := *u
		r.Scheme = "http"
		return &r, nil
	}
	return u, nil
}

// Issuer hands out streaming URLs for CRI requests; *Client is one.
type Issuer interface {
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*url.URL, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*url.URL, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*url.URL, error)
}

// ByLookup finds the pod's IDs with Lookup and asks Runtime for the URL.
type ByLookup struct {
	Lookup  PodLookup
	Runtime Issuer
}

var _ URLSource = ByLookup{}

// PodExists asks the Lookup for the pod's sandbox (a NotFound error: no
// such pod).
func (b ByLookup) PodExists(ctx context.Context, pod PodRef) error {
	_, err := b.Lookup.SandboxID(ctx, pod)
	return err
}

// RuntimeHandler is the Lookup's, when it can tell (RuntimeLookup can).
func (b ByLookup) RuntimeHandler(ctx context.Context, pod PodRef) (string, error) {
	if h, ok := b.Lookup.(HandlerSource); ok {
		return h.RuntimeHandler(ctx, pod)
	}
	return "", nil
}

func (b ByLookup) ExecURL(ctx context.Context, pod PodRef, container string, cmd []string, s Streams) (*url.URL, error) {
	id, err := b.Lookup.ContainerID(ctx, pod, container)
	if err != nil {
		return nil, err
	}
	return b.Runtime.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd,
		Tty: s.TTY, Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr})
}

func (b ByLookup) AttachURL(ctx context.Context, pod PodRef, container string, s Streams) (*url.URL, error) {
	id, err := b.Lookup.ContainerID(ctx, pod, container)
	if err != nil {
		return nil, err
	}
	return b.Runtime.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id,
		Tty: s.TTY, Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr})
}

func (b ByLookup) PortForwardURL(ctx context.Context, pod PodRef, ports []int32) (*url.URL, error) {
	id, err := b.Lookup.SandboxID(ctx, pod)
	if err != nil {
		return nil, err
	}
	return b.Runtime.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: id, Port: ports})
}

// Classify turns an error from a runtime's gRPC API into an *Error of the
// matching kind; errors that already are one pass unchanged.
func Classify(err error) error {
	var e *Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	return wrap(err)
}
