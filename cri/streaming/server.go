// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/wire"
)

// NewServer returns a Server for runtime, as cri-streaming's NewServer does.
func NewServer(config Config, runtime Runtime) (Server, error) {
	if config.BaseURL == nil {
		config.BaseURL = &url.URL{Scheme: "http", Host: config.Addr}
		if config.TLSConfig != nil {
			config.BaseURL.Scheme = "https"
		}
	}
	if config.BufferSize <= 0 {
		config.BufferSize = wire.DefaultBufferSize
	}
	limits := config.Limits.wire(config.StreamIdleTimeout)
	s := &runtimeServer{
		backend: backend{config: config, limits: limits, runtime: runtime},
		tokens:  newTokens(),
		// cri-streaming serves the others; it must not see the ones
		// served here (it would refuse them).
		upstreamRC: without(config.SupportedRemoteCommandProtocols, ProtocolV5),
		upstreamPF: without(config.SupportedPortForwardProtocols, ProtocolTunnel),
		rcUpgrader: wire.NewUpgrader(ProtocolV5, limits.WriteTimeout),
		pfUpgrader: wire.NewUpgrader(ProtocolTunnel, limits.WriteTimeout),
	}
	s.adapter = &criAdapter{&s.backend}
	s.native.v5 = slices.Contains(config.SupportedRemoteCommandProtocols, ProtocolV5)
	s.native.tunnel = slices.Contains(config.SupportedPortForwardProtocols, ProtocolTunnel)
	s.ctx, s.stop = context.WithCancel(context.Background())

	mux := http.NewServeMux()
	prefix := path.Dir(config.BaseURL.Path)
	for _, e := range []struct {
		kind  string
		serve func(http.ResponseWriter, *http.Request, string)
	}{{"exec", s.serveCommand}, {"attach", s.serveCommand}, {"portforward", s.servePortForward}} {
		h := func(w http.ResponseWriter, r *http.Request) { e.serve(w, r, e.kind) }
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			mux.HandleFunc(m+" "+path.Join("/", prefix, e.kind, "{token}"), h)
		}
	}
	s.handler = mux
	s.http = &http.Server{Addr: config.Addr, Handler: mux, TLSConfig: config.TLSConfig}
	return s, nil
}

func without(list []string, drop string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(p string) bool { return p == drop })
}

func (s *runtimeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *runtimeServer) GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	u, err := s.issue("exec", req, validateStreams(req))
	return answer(&runtimeapi.ExecResponse{Url: u}, err)
}

func (s *runtimeServer) GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	u, err := s.issue("attach", req, validateStreams(req))
	return answer(&runtimeapi.AttachResponse{Url: u}, err)
}

func (s *runtimeServer) GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	var invalid error
	if req.PodSandboxId == "" {
		invalid = grpcstatus.Errorf(codes.InvalidArgument, "missing required pod_sandbox_id")
	}
	u, err := s.issue("portforward", req, invalid)
	return answer(&runtimeapi.PortForwardResponse{Url: u}, err)
}

// validateStreams is cri-streaming's rule for exec and attach requests.
func validateStreams(req streamRequest) error {
	switch {
	case req.GetContainerId() == "":
		return grpcstatus.Errorf(codes.InvalidArgument, "missing required container_id")
	case req.GetTty() && req.GetStderr():
		return grpcstatus.Errorf(codes.InvalidArgument, "tty and stderr cannot both be true")
	case !req.GetStdin() && !req.GetStdout() && !req.GetStderr():
		return grpcstatus.Errorf(codes.InvalidArgument, "one of stdin, stdout, or stderr must be set")
	}
	return nil
}

// issue returns the URL that serves req once, unless req is invalid.
func (s *runtimeServer) issue(kind string, req any, invalid error) (string, error) {
	if invalid != nil {
		return "", invalid
	}
	token, err := s.tokens.insert(req)
	if err != nil {
		return "", err
	}
	return s.config.BaseURL.ResolveReference(&url.URL{Path: path.Join(kind, token)}).String(), nil
}

// answer is a CRI call's response: none when the call failed.
func answer[R any](resp *R, err error) (*R, error) {
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (s *runtimeServer) Start(stayUp bool) error {
	if !stayUp {
		return errors.New("stayUp=false is not yet implemented")
	}
	l, err := net.Listen("tcp", s.config.Addr)
	if err != nil {
		return err
	}
	s.config.BaseURL.Host = l.Addr().String()
	if s.config.TLSConfig != nil {
		return s.http.ServeTLS(l, "", "")
	}
	return s.http.Serve(l)
}

// Stop closes the listener and the connections cri-streaming serves, and
// ends every session's runtime call through its context: a natively served
// session tells its client the server is going away and closes with a
// close handshake. It returns once every runtime call has returned and its
// status is written, or after StopTimeout: a runtime stops (or restarts)
// right after, and a call still running then would leave its process
// behind in the container, with nobody to read it or stop it (containerd
// kills an exec's process when its call's context ends, but only while it
// is still running), and a status not yet written would leave the client
// a cut session that SPDY clients read as success.
func (s *runtimeServer) Stop() error {
	s.stop()
	err := s.http.Close()
	if !s.calls.wait(StopTimeout) {
		klog.Background().Info("Runtime calls still running after the streaming server stopped", "timeout", StopTimeout)
	}
	return err
}

// StopTimeout bounds Stop's wait for the sessions' runtime calls.
const StopTimeout = 5 * time.Second
