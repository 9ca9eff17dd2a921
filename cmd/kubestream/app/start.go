// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/refruntime"
	"github.com/kubestream/kubestream/server"
	"github.com/kubestream/kubestream/translator"
)

// Running is a started kubestream.
type Running struct {
	Server   *server.Server
	Addr     string // host:port
	URL      string // https://host:port (http:// in development mode)
	Endpoint string // the CRI endpoint in use
	Runtime  *refruntime.Runtime

	cleanups []func() // undo's, last first
}

// Stop ends sessions, the listener, the CRI client and the reference runtime.
func (r *Running) Stop() { r.undo() }

// Start brings kubestream up and returns once it is listening: the
// runtime (runtimeClient), the server's configuration (serverConfig), who
// may use it (secure), then the listener (listen). Each step registers
// its own undoing with run, which Stop (or a failed Start) runs last first.
func Start(ctx context.Context, o *ServeOptions) (_ *Running, err error) {
	logger := klog.FromContext(ctx)
	run := &Running{}
	defer func() {
		if err != nil {
			run.undo()
		}
	}()
	client, err := run.runtimeClient(ctx, o)
	if err != nil {
		return nil, err
	}
	cfg, err := run.serverConfig(ctx, o, client)
	if err != nil {
		return nil, err
	}
	tlsConfig, servingFiles, err := secure(ctx, o, &cfg)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(cfg)
	if err != nil {
		return nil, err
	}
	run.Server = srv
	if servingFiles != nil {
		rctx, stop := context.WithCancel(klog.NewContext(context.Background(), logger))
		reloaded := make(chan struct{})
		go func() {
			defer close(reloaded)
			servingFiles.reload(rctx, o.TLSReloadPeriod, srv.Metrics())
		}()
		run.onStop(func() { stop(); <-reloaded })
	}
	if err := run.listen(ctx, o, tlsConfig); err != nil {
		return nil, err
	}
	logger.Info("kubestream serving", "url", run.URL, "runtime", run.Endpoint,
		"webSockets", o.Features.Enabled(server.ExtendWebSocketsToKubelet))
	return run, nil
}

// onStop registers an undoing step; undo runs them last first, once.
func (r *Running) onStop(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *Running) undo() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.cleanups = nil
}

// runtimeClient starts the embedded reference runtime when no endpoint is
// given, and dials the runtime's CRI.
func (r *Running) runtimeClient(ctx context.Context, o *ServeOptions) (*cri.Client, error) {
	logger := klog.FromContext(ctx)
	r.Endpoint = o.ContainerRuntimeEndpoint
	if r.Endpoint == "" {
		pods, err := referencePods(o)
		if err != nil {
			return nil, err
		}
		// The reference runtime keeps cri-streaming's own timeouts, as a
		// separate runtime would: the node's flags govern the node.
		rt, err := refruntime.Start(ctx, refruntime.Options{Pods: pods, WebSockets: o.ReferenceWebSockets, RelativeURLs: o.ReferenceRelativeURLs})
		if err != nil {
			return nil, fmt.Errorf("starting the embedded reference runtime: %w", err)
		}
		r.onStop(rt.Stop)
		r.Runtime = rt
		r.Endpoint = rt.Endpoint()
		logger.Info("Using the embedded reference runtime", "endpoint", r.Endpoint)
	}
	client, err := cri.Dial(ctx, r.Endpoint, o.RuntimeRequestTimeout)
	if err != nil {
		return nil, err
	}
	r.onStop(func() { client.Close() })
	return client, nil
}

// serverConfig is the server's configuration from the flags, with the
// audit log opened when one is asked for.
func (r *Running) serverConfig(ctx context.Context, o *ServeOptions, client *cri.Client) (server.Config, error) {
	tc := translator.DefaultConfig()
	tc.IdleTimeout = o.StreamingConnectionIdleTimeout
	tc.StreamCreationTimeout = o.StreamCreationTimeout
	tc.PingPeriod = o.WebSocketPingPeriod
	tc.PongTimeout = o.WebSocketPongTimeout
	mode := server.DirectMode(o.RuntimeWebSocketStreaming)
	if mode != server.DirectAuto && mode != server.DirectNever {
		return server.Config{}, fmt.Errorf("--runtime-websocket-streaming=%q: want auto or never", o.RuntimeWebSocketStreaming)
	}
	if err := o.PortForwardModes.Validate(); err != nil {
		return server.Config{}, err
	}
	cfg := server.Config{
		Lookup:     cri.RuntimeLookup{C: client},
		Runtime:    client,
		Direct:     server.DirectConfig{Mode: mode, Recheck: o.RuntimeWebSocketRecheckPeriod},
		Translator: tc,
		Features:   o.Features,
		NodeName:   o.NodeName,

		StreamingVerbByMethod: o.StreamingVerbByMethod,
		RuntimeReady:          client.Ready,
		Limits:                server.Limits{MaxSessions: o.MaxStreamingSessions, MaxSessionsPerPod: o.MaxStreamingSessionsPerPod},
		ShutdownMessage:       o.ShutdownMessage,
		Sandboxes:             client,
		PortForwardModes:      o.PortForwardModes,
		Metrics:               server.NewMetrics(),
	}
	if cfg.Limits.MaxSessions == 0 {
		cfg.Limits.MaxSessions = server.DefaultMaxSessions()
	}
	if o.AuditLogPath != "" {
		// Closed after the server's shutdown (undone last first), so
		// every session's last record is written.
		w, err := audit.NewFile(klog.FromContext(ctx).WithName("audit"), audit.FileOptions{Path: o.AuditLogPath,
			MaxSizeMB: o.AuditLogMaxSize, MaxBackups: o.AuditLogMaxBackup, MaxAgeDays: o.AuditLogMaxAge,
			Dropped: cfg.Metrics.AuditDropped})
		if err != nil {
			return server.Config{}, fmt.Errorf("--audit-log-path: %w", err)
		}
		r.onStop(func() { _ = w.Close() })
		cfg.Audit = w
	}
	if o.SessionRecordingDir != "" {
		cfg.Recording = &server.RecordingConfig{Dir: o.SessionRecordingDir, Stdin: o.SessionRecordingStdin}
	}
	return cfg, nil
}

// secure sets who may use the server (client certificates, the
// authorizer) and returns the TLS configuration with the serving files
// to reload; nil for --insecure-development-http.
func secure(ctx context.Context, o *ServeOptions, cfg *server.Config) (*tls.Config, *servingTLS, error) {
	switch {
	case o.InsecureDevelopmentHTTP:
		klog.FromContext(ctx).Info("WARNING: serving plain HTTP without authentication (--insecure-development-http); never do this on a real node")
		return nil, nil, nil
	case o.TLSCertFile == "" || o.TLSPrivateKeyFile == "" || o.ClientCAFile == "":
		return nil, nil, errors.New("--tls-cert-file, --tls-private-key-file and --client-ca-file are required (or --insecure-development-http for development)")
	}
	st, err := newServingTLS(o.TLSCertFile, o.TLSPrivateKeyFile, o.ClientCAFile)
	if err != nil {
		return nil, nil, err
	}
	cfg.Authenticator = st.authenticator()
	if cfg.Authorizer, err = authorizerFor(o); err != nil {
		return nil, nil, err
	}
	tlsConfig, err := st.config(o.TLSMinVersion, o.TLSCipherSuites)
	if err != nil {
		return nil, nil, err
	}
	return tlsConfig, st, nil
}

// listen serves r.Server on the flags' address (TLS unless tlsConfig is
// nil) until Stop, which closes the listener and then ends the sessions.
func (r *Running) listen(ctx context.Context, o *ServeOptions, tlsConfig *tls.Config) error {
	logger := klog.FromContext(ctx)
	l, err := net.Listen("tcp", net.JoinHostPort(o.Address, strconv.Itoa(o.Port)))
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	scheme := "http"
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
		scheme = "https"
	}
	r.Addr = l.Addr().String()
	r.URL = scheme + "://" + r.Addr
	srv := r.Server
	hs := newHTTPServer(ctx, srv, srv.Metrics(), o.RequestReadTimeout, o.IdleConnectionTimeout)
	served := serveHTTP(ctx, hs, l)
	r.onStop(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = hs.Close()
		<-served
		if err := srv.Shutdown(sctx); err != nil {
			logger.Error(err, "Sessions did not end in time")
		}
	})
	return nil
}
