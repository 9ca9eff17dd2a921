// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package refruntime

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"

	ksstreaming "github.com/kubestream/kubestream/cri/streaming"
)

// serveStreaming listens for the streaming URLs (opts.StreamingAddr,
// 127.0.0.1:0 when empty) and serves them; it returns their base URL.
func (r *Runtime) serveStreaming(opts Options) (*url.URL, error) {
	addr := opts.StreamingAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for runtime streaming on %s: %w", addr, err)
	}
	cfg := streamingConfig(l.Addr().String(), opts)
	handler, err := r.streamingHandler(cfg, opts)
	if err != nil {
		l.Close()
		return nil, err
	}
	r.httpSrv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = r.httpSrv.Serve(trackingListener{Listener: l, r: r})
	}()
	return cfg.BaseURL, nil
}

// streamingConfig is cri-streaming's default configuration for a listener
// at addr, with the URLs and timeouts opts asks for.
func streamingConfig(addr string, opts Options) streaming.Config {
	cfg := streaming.DefaultConfig
	cfg.Addr = addr
	cfg.BaseURL = &url.URL{Scheme: "http", Host: addr}
	if opts.RelativeURLs {
		cfg.BaseURL = &url.URL{Host: cfg.Addr, Path: "/cri/"}
	}
	if opts.StreamIdleTimeout > 0 {
		cfg.StreamIdleTimeout = opts.StreamIdleTimeout
	}
	if opts.StreamCreationTimeout > 0 {
		cfg.StreamCreationTimeout = opts.StreamCreationTimeout
	}
	return cfg
}

// streamingHandler creates the streaming server, kubestream's runtime-side
// server with opts.WebSockets, cri-streaming's otherwise, and returns what
// serves the streaming URLs.
func (r *Runtime) streamingHandler(cfg streaming.Config, opts Options) (http.Handler, error) {
	var handler http.Handler
	var err error
	if opts.WebSockets {
		kcfg := ksstreaming.DefaultConfig()
		kcfg.Addr, kcfg.BaseURL = cfg.Addr, cfg.BaseURL
		kcfg.StreamIdleTimeout, kcfg.StreamCreationTimeout = cfg.StreamIdleTimeout, cfg.StreamCreationTimeout
		if opts.Metrics != nil {
			if kcfg.Metrics, err = ksstreaming.NewMetrics(opts.Metrics); err != nil {
				return nil, fmt.Errorf("registering runtime streaming metrics: %w", err)
			}
		}
		r.streaming, err = ksstreaming.NewServer(kcfg, streamRuntime{r})
		handler = r.streaming
	} else {
		r.streaming, err = streaming.NewServer(cfg, streamRuntime{r})
		handler = quietRefusal{next: r.streaming, logger: r.logger}
	}
	if err != nil {
		return nil, fmt.Errorf("creating runtime streaming server: %w", err)
	}
	return handler, nil
}

// serveCRI serves the CRI RuntimeService on DIR/cri.sock, DIR being the
// socket directory.
func (r *Runtime) serveCRI() error {
	sock := filepath.Join(r.sockDir, "cri.sock")
	_ = os.Remove(sock)
	gl, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listening on CRI socket %s: %w", sock, err)
	}
	r.endpoint = "unix://" + sock
	r.grpc = grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(r.grpc, r)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = r.grpc.Serve(gl)
	}()
	return nil
}

// trackingListener records every streaming connection so Stop can cut
// them all, as a crashing runtime would: http.Server.Close leaves hijacked
// connections alone.
type trackingListener struct {
	net.Listener
	r *Runtime
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, r: l.r}
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	if l.r.stopped {
		c.Close()
		return nil, net.ErrClosed
	}
	l.r.conns[tc] = struct{}{}
	return tc, nil
}

type trackedConn struct {
	net.Conn
	r *Runtime
}

func (c *trackedConn) Close() error {
	c.r.mu.Lock()
	delete(c.r.conns, c)
	c.r.mu.Unlock()
	return c.Conn.Close()
}
