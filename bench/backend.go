// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"

	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"

	ksstreaming "github.com/kubestream/kubestream/cri/streaming"
)

// The benchmark backend: k8s.io/cri-streaming (what the kubelet and
// containerd's streaming servers are built on) with in-process commands, so
// the figures measure streaming, not fork/exec or pipes.
//
//	emit N   write N bytes to stdout
//	sink     read stdin to EOF
//	echo     copy stdin to stdout
//
// Port-forward: port 1 emits pfSize bytes, port 2 sinks, any other echoes.
type benchRuntime struct{ pfSize int64 }

// zeros is a reader of endless zero bytes that costs nothing per byte.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// letters is an endless reader of 'x'.
type letters struct{}

func (letters) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

var errUnknownCommand = errors.New("unknown bench command")

func (benchRuntime) Exec(_ context.Context, _ string, cmd []string, in io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommandserver.TerminalSize) error {
	if len(cmd) == 0 {
		return errUnknownCommand
	}
	buf := make([]byte, 32*1024)
	switch cmd[0] {
	case "emit":
		n, err := strconv.ParseInt(cmd[1], 10, 64)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(out, io.LimitReader(zeros{}, n), buf)
		return err
	case "emittext": // printable, as a terminal's output is (for recordings)
		n, err := strconv.ParseInt(cmd[1], 10, 64)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(out, io.LimitReader(letters{}, n), buf)
		return err
	case "sink":
		_, err := io.CopyBuffer(io.Discard, in, buf)
		return err
	case "echo":
		_, err := io.CopyBuffer(out, in, buf)
		return err
	}
	return errUnknownCommand
}

func (r benchRuntime) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	return r.Exec(ctx, id, []string{"echo"}, in, out, errw, tty, resize)
}

func (r benchRuntime) PortForward(_ context.Context, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	buf := make([]byte, 32*1024)
	var err error
	switch port {
	case 1:
		_, err = io.CopyBuffer(stream, io.LimitReader(zeros{}, r.pfSize), buf)
	case 2:
		_, err = io.CopyBuffer(io.Discard, stream, buf)
	default:
		_, err = io.CopyBuffer(stream, stream, buf)
	}
	return err
}

// benchCRI serves the CRI calls the paths need: one static pod, Exec and
// PortForward URLs from cri-streaming.
type benchCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	srv streaming.Server
}

func (c *benchCRI) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "kubestream-bench", RuntimeApiVersion: "v1"}, nil
}

func (c *benchCRI) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return c.srv.GetExec(req)
}

func (c *benchCRI) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return c.srv.GetAttach(req)
}

func (c *benchCRI) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if req.PodSandboxId == "" {
		return nil, status.Error(codes.InvalidArgument, "no sandbox")
	}
	return c.srv.GetPortForward(req)
}

// backend is a running benchmark runtime: a CRI socket and a streaming port.
type backend struct {
	endpoint string
	stop     func()
}

// startBackend runs the bench runtime behind cri-streaming's server, or,
// with impl "kubestream", behind kubestream's runtime-side server
// (cri/streaming), which serves v5 and the tunnel itself. Either way the
// streaming port also answers /debug/bench-stats.
func startBackend(dir string, pfSize int64, impl string) (*backend, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	base := &url.URL{Scheme: "http", Host: l.Addr().String()}
	var srv streaming.Server
	if impl == "kubestream" {
		cfg := ksstreaming.DefaultConfig()
		cfg.Addr, cfg.BaseURL = base.Host, base
		srv, err = ksstreaming.NewServer(cfg, benchRuntime{pfSize: pfSize})
	} else {
		cfg := streaming.DefaultConfig
		cfg.Addr, cfg.BaseURL = base.Host, base
		srv, err = streaming.NewServer(cfg, benchRuntime{pfSize: pfSize})
	}
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", srv)
	mux.HandleFunc("/debug/bench-stats", serveStats)
	mux.HandleFunc("/debug/raw-stdout", rawStdout)
	mux.HandleFunc("/debug/raw-stdin", rawStdin)
	if err := os.WriteFile(filepath.Join(dir, "http.addr"), []byte(base.Host), 0o644); err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = hs.Serve(l) }()
	sock := filepath.Join(dir, "bench-cri.sock")
	_ = os.Remove(sock)
	gl, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	gs := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(gs, &benchCRI{srv: srv})
	go func() { _ = gs.Serve(gl) }()
	return &backend{endpoint: "unix://" + sock, stop: func() {
		gs.Stop()
		_ = hs.Close()
	}}, nil
}

func (b *backend) String() string { return fmt.Sprintf("backend at %s", b.endpoint) }

// rawStdout and rawStdin are the floor of the runtime side's figures: the
// bytes the bench's emit and sink move, written to and read from the bare
// connection (no framing, no protocol) with the same 32 KiB buffer.
// Whatever a streaming server does, its process pays at least this per
// byte: the ratios a target asks for are measured against it too.
func rawStdout(w http.ResponseWriter, r *http.Request) {
	n, c, _, ok := rawTake(w, r)
	if !ok {
		return
	}
	defer c.Close()
	buf := make([]byte, 32<<10)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := c.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
}

func rawStdin(w http.ResponseWriter, r *http.Request) {
	n, c, brw, ok := rawTake(w, r)
	if !ok {
		return
	}
	defer c.Close()
	buf := make([]byte, 32<<10)
	if _, err := io.CopyBuffer(io.Discard, io.LimitReader(brw, n), buf); err == nil {
		_, _ = c.Write([]byte{'k'})
	}
}

// rawTake reads the byte count and takes the connection over.
func rawTake(w http.ResponseWriter, r *http.Request) (int64, net.Conn, *bufio.ReadWriter, bool) {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return 0, nil, nil, false
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	return n, c, brw, err == nil
}

// rawClient is the other end of rawStdout and rawStdin.
func rawClient(addr, what string, n int64) (time.Duration, error) {
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET /debug/raw-%s?n=%d HTTP/1.1\r\nHost: bench\r\n\r\n", what, n); err != nil {
		return 0, err
	}
	buf := make([]byte, 32<<10)
	if what == "stdin" {
		for left := n; left > 0; {
			k := min(left, int64(len(buf)))
			if _, err := c.Write(buf[:k]); err != nil {
				return 0, err
			}
			left -= k
		}
		if _, err := io.ReadFull(c, buf[:1]); err != nil {
			return 0, fmt.Errorf("raw stdin: no acknowledgement: %w", err)
		}
		return time.Since(start), nil
	}
	var got int64
	for got < n {
		k, err := c.Read(buf)
		got += int64(k)
		if err != nil {
			break
		}
	}
	if got != n {
		return 0, fmt.Errorf("raw stdout: %d of %d bytes", got, n)
	}
	return time.Since(start), nil
}
