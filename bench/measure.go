// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubestream/kubestream/cri"
)

// path is one way from client to backend: direct SPDY to the runtime's
// URL, or a WebSocket to a translator at base.
type path struct {
	name  string
	base  string // translator URL; "" for direct SPDY
	relay string // direct SPDY through this TCP relay (host:port) instead of straight to the runtime
	cri   *cri.Client
	proc  *child // the translator's (or relay's) process in three-process mode
	v5    bool   // direct to the runtime's URL over v5 (a runtime that speaks it) instead of SPDY
}

// viaRelay points a runtime URL at the path's relay, if it has one.
func (p *path) viaRelay(u *url.URL) *url.URL {
	if p.relay == "" {
		return u
	}
	v := *u
	v.Host = p.relay
	return &v
}

func (p *path) execURL(cmd []string, stdin bool) string {
	q := url.Values{"command": cmd, "output": {"1"}}
	if stdin {
		q.Set("input", "1")
	}
	return p.base + "/exec/default/bench/c?" + q.Encode()
}

// executor returns client-go's executor for the path: SPDY for direct,
// WebSocket (v5) for the translators.
func (p *path) executor(ctx context.Context, cmd []string, stdin bool) (remotecommand.Executor, error) {
	if p.base == "" {
		u, err := p.cri.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: benchContainer, Cmd: cmd, Stdin: stdin, Stdout: true})
		if err != nil {
			return nil, err
		}
		u = p.viaRelay(u)
		if p.v5 {
			return remotecommand.NewWebSocketExecutor(&rest.Config{Host: u.Scheme + "://" + u.Host}, http.MethodGet, u.String())
		}
		return remotecommand.NewSPDYExecutor(&rest.Config{Host: u.Scheme + "://" + u.Host}, http.MethodPost, u)
	}
	return remotecommand.NewWebSocketExecutor(&rest.Config{Host: p.base}, http.MethodGet, p.execURL(cmd, stdin))
}

type counter struct {
	mu    sync.Mutex
	n     int64
	first chan struct{}
	more  chan struct{} // one slot: n grew (diskBeside)
}

func (c *counter) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.n == 0 && c.first != nil && len(b) > 0 {
		close(c.first)
	}
	c.n += int64(len(b))
	c.mu.Unlock()
	if c.more != nil {
		select {
		case c.more <- struct{}{}:
		default:
		}
	}
	return len(b), nil
}

func (p *path) stdout(ctx context.Context, size int64) (time.Duration, error) {
	start := time.Now()
	ex, err := p.executor(ctx, []string{"emit", itoa(size)}, false)
	if err != nil {
		return 0, err
	}
	var c counter
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &c}); err != nil {
		return 0, err
	}
	if c.n != size {
		return 0, fmt.Errorf("%s: got %d of %d stdout bytes", p.name, c.n, size)
	}
	return time.Since(start), nil
}

// ttyStdout is stdout on a terminal (a translator path only): what a
// recording sees. With diskDir set, the client writes every MiB it has
// received to a file in diskDir beside the session, as a recorder's writer
// would (see diskBeside); the time is the session's alone.
func (p *path) ttyStdout(ctx context.Context, size int64, diskDir string) (time.Duration, error) {
	start := time.Now()
	q := url.Values{"command": {"emittext", itoa(size)}, "output": {"1"}, "tty": {"1"}}
	ex, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: p.base}, http.MethodGet, p.base+"/exec/default/bench/c?"+q.Encode())
	if err != nil {
		return 0, err
	}
	var c counter
	var disk chan error
	if diskDir != "" {
		c.more = make(chan struct{}, 1)
		disk = make(chan error, 1)
		go func() { disk <- diskBeside(diskDir, &c) }()
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &c, Tty: true})
	d := time.Since(start)
	if disk != nil {
		close(c.more)
		if derr := <-disk; err == nil {
			err = derr
		}
	}
	if err != nil {
		return 0, err
	}
	if c.n != size {
		return 0, fmt.Errorf("%s: got %d of %d tty bytes", p.name, c.n, size)
	}
	return d, nil
}

// diskBeside is the disk's share of a recording, without the recorder: it
// writes to a new file in dir, 1 MiB at a time with direct I/O where the
// file system has it (as the recorder writes), as many bytes as c has
// received, until c.more is closed. Nothing is copied or encoded: what the
// session loses to it is what any recorder that writes the bytes to this
// disk costs it.
func diskBeside(dir string, c *counter) error {
	fd, done, err := directFile(dir, "beside-*.cast")
	if err != nil {
		return err
	}
	defer done()
	buf := make([][]byte, 8) // 1 MiB, as the recorder's blocks
	for i := range buf {
		buf[i] = bytes.Repeat([]byte{'x'}, 128<<10)
	}
	var written int64
	for open := true; open; {
		_, open = <-c.more
		c.mu.Lock()
		n := c.n
		c.mu.Unlock()
		for ; written+1<<20 <= n; written += 1 << 20 {
			if _, err := unix.Pwritev(fd, buf, written); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *path) stdin(ctx context.Context, size int64) (time.Duration, error) {
	start := time.Now()
	ex, err := p.executor(ctx, []string{"sink"}, true)
	if err != nil {
		return 0, err
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: io.LimitReader(zeros{}, size), Stdout: io.Discard})
	return time.Since(start), err
}

// setup measures session start to first stdout byte.
func (p *path) setup(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	ex, err := p.executor(ctx, []string{"emit", "1"}, false)
	if err != nil {
		return 0, err
	}
	c := counter{first: make(chan struct{})}
	var first time.Duration
	done := make(chan error, 1)
	go func() { done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &c}) }()
	select {
	case <-c.first:
		first = time.Since(start)
	case err := <-done:
		return 0, fmt.Errorf("session ended before its first byte: %v", err)
	}
	return first, <-done
}

// echo measures n one-byte round trips over one session.
func (p *path) echo(ctx context.Context, n int) ([]time.Duration, error) {
	ex, err := p.executor(ctx, []string{"echo"}, true)
	if err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW})
		outW.Close()
	}()
	lat := make([]time.Duration, 0, n)
	one, got := []byte{'x'}, make([]byte, 1)
	for i := 0; i < n+20; i++ { // the first 20 warm up
		start := time.Now()
		if _, err := inW.Write(one); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(outR, got); err != nil {
			return nil, err
		}
		if i >= 20 {
			lat = append(lat, time.Since(start))
		}
	}
	inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	return lat, <-done
}

// idleSession opens a raw v5 session running echo and waits until the
// translator said it is ready; it stays open until closed.
func (p *path) idleSession() (*websocket.Conn, error) {
	d := websocket.Dialer{Subprotocols: []string{"v5.channel.k8s.io"}, HandshakeTimeout: time.Minute,
		ReadBufferSize: 512, WriteBufferSize: 512}
	u := strings.Replace(p.execURL([]string{"echo"}, true), "http://", "ws://", 1)
	c, _, err := d.Dial(u, nil)
	if err != nil {
		return nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, _, err := c.ReadMessage(); err != nil { // the readiness frame
		c.Close()
		return nil, err
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, nil
}
