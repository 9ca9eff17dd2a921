// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cri talks to a container runtime over the CRI RuntimeService:
// finding a pod's sandbox and containers by the kubelet's labels, and asking
// for streaming URLs. It knows nothing of WebSocket or SPDY framing.
//
// Reading order, each file before the files it uses: urls.go (URLSource,
// what server asks a session's URL of, and ByLookup, the standalone one),
// lookup.go (PodRef, PodLookup, and RuntimeLookup, which finds a pod by the
// kubelet's labels), netns.go (a sandbox's network namespace and
// readiness, for the port-forward modes the node serves itself), client.go
// (Client: the CRI connection and its calls) and errors.go (Error, and the
// HTTP status each Kind is answered with).
//
// What runs back up the order: client.go makes the runtime's URL one that
// can be dialled with urls.go's ResolveStreamURL, the one rule for that,
// which server applies to a kubelet's URLs too and so sits with
// URLSource; lookup.go has the compiler check that RuntimeLookup is a
// HandlerSource, which urls.go defines beside URLSource.
//
// Who imports it: server and the kubelet adapter; cri/streaming is the
// one package meant for code outside the module (a runtime's streaming
// server).
package cri

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Client is a CRI RuntimeService client with a timeout on every call.
type Client struct {
	conn    *grpc.ClientConn
	rs      runtimeapi.RuntimeServiceClient
	timeout time.Duration
}

// Dial connects to a runtime endpoint such as unix:///run/containerd/containerd.sock.
// gRPC connects lazily; Version is called once so a wrong endpoint fails here.
func Dial(ctx context.Context, endpoint string, timeout time.Duration) (*Client, error) {
	target, err := grpcTarget(endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, fmt.Errorf("creating CRI client for %s: %w", endpoint, err)
	}
	c := &Client{conn: conn, rs: runtimeapi.NewRuntimeServiceClient(conn), timeout: timeout}
	vctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := c.rs.Version(vctx, &runtimeapi.VersionRequest{}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("CRI Version on %s: %w", endpoint, wrap(err))
	}
	return c, nil
}

// grpcTarget accepts the kubelet's endpoint forms: unix:///path, or a bare
// absolute path.
func grpcTarget(endpoint string) (string, error) {
	if strings.HasPrefix(endpoint, "/") {
		return "unix://" + endpoint, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "unix" || u.Path == "" {
		return "", fmt.Errorf("container runtime endpoint %q: want unix:///absolute/path", endpoint)
	}
	return "unix://" + u.Path, nil
}

// Close releases the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Runtime returns the raw RuntimeService client, for callers that need more
// than streaming (tests, the e2e set-up).
func (c *Client) Runtime() runtimeapi.RuntimeServiceClient { return c.rs }

func (c *Client) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// Exec asks the runtime for a single-use exec URL.
func (c *Client) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*url.URL, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.Exec(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("CRI Exec in container %s: %w", req.ContainerId, wrap(err))
	}
	return parseStreamURL(resp.Url)
}

// Attach asks the runtime for a single-use attach URL.
func (c *Client) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*url.URL, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.Attach(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("CRI Attach to container %s: %w", req.ContainerId, wrap(err))
	}
	return parseStreamURL(resp.Url)
}

// PortForward asks the runtime for a single-use port-forward URL.
func (c *Client) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*url.URL, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.PortForward(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("CRI PortForward to sandbox %s: %w", req.PodSandboxId, wrap(err))
	}
	return parseStreamURL(resp.Url)
}

// Ready reports whether the runtime answers CRI Status and says it is
// ready (the RuntimeReady condition), as the kubelet's runtime health
// check does; the network condition is not the streaming server's concern.
func (c *Client) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(c.timeout, 5*time.Second))
	defer cancel()
	resp, err := c.rs.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Errorf("CRI Status: %w", wrap(err))
	}
	for _, cond := range resp.GetStatus().GetConditions() {
		if cond.Type == runtimeapi.RuntimeReady {
			if !cond.Status {
				return fmt.Errorf("container runtime not ready: %s %s", cond.Reason, cond.Message)
			}
			return nil
		}
	}
	return errors.New("container runtime reports no RuntimeReady condition")
}

func parseStreamURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &Error{Kind: Internal, Msg: fmt.Sprintf("container runtime returned an unusable streaming URL %q", raw)}
	}
	return ResolveStreamURL(u)
}
