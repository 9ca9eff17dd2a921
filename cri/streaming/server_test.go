// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/kubestream/kubestream/internal/wiretest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// spdystream's shutdown (cri-streaming's connections) lingers up
		// to a second after a close, client-go's v5 heartbeat until its
		// next ping: waiting them out is part of the check.
		opts := []goleak.Option{
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
			// The client's, not this package's: client-go's port-forward
			// reads a connection's error stream into an unbuffered channel
			// that nobody reads when creating the data stream fails (a
			// forward stopped while a connection was being opened).
			goleak.IgnoreTopFunction("k8s.io/client-go/tools/portforward.(*PortForwarder).handleConnection.func1"),
		}
		var err error
		for deadline := time.Now().Add(8 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if err = goleak.Find(opts...); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fakeRuntime answers commands by name, so each test says what the process
// does.
type fakeRuntime struct {
	mu      sync.Mutex
	stdinAt []string // what "cat" read, per session, when its stdin ended
	// cleanEOFs counts "eof-cat" processes that saw their stdin end while
	// their session's context was live (a runtime turns any end of the
	// stdin it copies into the process's EOF).
	cleanEOFs int
	echo      string // PortForward's target
	resets    string // PortForward's target for port 4: wiretest.ServeResets
	// running and killed count "sleep-kill" processes started, and ended
	// by their context, each after a kill that takes killTime, as
	// containerd's Exec does.
	running, killed int
}

// killTime is what a "sleep-kill" process takes to die once its call's
// context ends.
const killTime = 300 * time.Millisecond

func (f *fakeRuntime) Exec(ctx context.Context, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize) error {
	switch cmd[0] {
	case "cat": // stdin to stdout until EOF, then exit 0: half-closed stdin
		_, err := io.Copy(out, in)
		return err
	case "eof-cat": // cat as a real runtime runs it: any end of stdin is EOF, exit 0
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			_, _ = io.Copy(out, in)
		}()
		select {
		case <-copied:
			if ctx.Err() == nil {
				f.mu.Lock()
				f.cleanEOFs++
				f.mu.Unlock()
				return nil
			}
		case <-ctx.Done(): // killed: the copy ends when the server closes stdin
		}
		return utilexec.CodeExitError{Err: errors.New("killed"), Code: 137}
	case "exit":
		n, _ := strconv.Atoi(cmd[1])
		fmt.Fprintf(out, "bye\n")
		if errw != nil {
			fmt.Fprintf(errw, "err\n")
		}
		return utilexec.CodeExitError{Err: fmt.Errorf("exit status %d", n), Code: n}
	case "lines": // output that must all arrive before the status
		n, _ := strconv.Atoi(cmd[1])
		var b bytes.Buffer
		for i := range n {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		_, err := out.Write(b.Bytes())
		return err
	case "resize":
		if !tty {
			return errors.New("no tty")
		}
		sz := <-resize
		fmt.Fprintf(out, "%dx%d", sz.Width, sz.Height)
		return nil
	case "readsizes": // the size of each read of stdin, one a line, at EOF
		buf := make([]byte, 1<<20)
		var sizes bytes.Buffer
		for {
			n, err := in.Read(buf)
			if n > 0 {
				fmt.Fprintf(&sizes, "%d\n", n)
			}
			if err != nil {
				_, werr := out.Write(sizes.Bytes())
				return werr
			}
		}
	case "pipes": // output copied from pipes as containerd copies its FIFOs
		return pipeOutput(cmd[1], cmd[2], out, errw)
	case "sleep":
		<-ctx.Done()
		return ctx.Err()
	case "sleep-kill":
		f.mu.Lock()
		f.running++
		f.mu.Unlock()
		<-ctx.Done()
		time.Sleep(killTime)
		f.mu.Lock()
		f.killed++
		f.mu.Unlock()
		return utilexec.CodeExitError{Err: errors.New("killed"), Code: 137}
	case "fail":
		return errors.New("runtime broke")
	}
	return fmt.Errorf("unknown command %q", cmd[0])
}

func (f *fakeRuntime) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize) error {
	return f.Exec(ctx, id, []string{"cat"}, in, out, errw, tty, resize)
}

func (f *fakeRuntime) PortForward(ctx context.Context, _ string, port int32, stream io.ReadWriteCloser) error {
	switch port {
	case 1:
		return errors.New("nothing listens on port 1")
	case 2: // reads nothing until the session ends
		<-ctx.Done()
		return nil
	case 3: // writes until the stream fails, and returns why, as containerd's PortForward does
		chunk := make([]byte, 32<<10)
		for {
			if _, err := stream.Write(chunk); err != nil {
				return err
			}
		}
	case 4: // the pod may reset the connection; the copy's error wrapped as containerd wraps it
		c, err := net.Dial("tcp", f.resets)
		if err != nil {
			return err
		}
		defer c.Close()
		go func() {
			_, _ = io.Copy(c, stream)
			_ = c.(*net.TCPConn).CloseWrite()
		}()
		if _, err := io.Copy(stream, c); err != nil {
			return fmt.Errorf("failed to execute portforward for %q port %d: %w", "p1", port, err)
		}
		return nil
	}
	c, err := net.Dial("tcp", f.echo)
	if err != nil {
		return err
	}
	defer c.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(stream, c)
	}()
	_, _ = io.Copy(c, stream)
	_ = c.(*net.TCPConn).CloseWrite()
	<-done
	return nil
}

type testServer struct {
	Server
	url  string
	m    *Metrics
	rt   *fakeRuntime
	stop func()
	// exit closes every connection the server accepted, as a runtime
	// process that exits does.
	exit func()
}

func start(t *testing.T, mod func(*Config)) *testServer { return startServer(t, mod, false) }

func startServer(t *testing.T, mod func(*Config), useTLS bool) *testServer {
	t.Helper()
	echo := tcpEcho(t)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Metrics = m
	cfg.BaseURL = &url.URL{Scheme: "http", Host: "placeholder"}
	if mod != nil {
		mod(&cfg)
	}
	rt := &fakeRuntime{echo: echo, resets: wiretest.ResetServer(t)}
	srv, err := NewServer(cfg, rt)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	var connsMu sync.Mutex
	var conns []net.Conn // every connection, hijacked ones too (exit)
	hs.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			connsMu.Lock()
			conns = append(conns, c)
			connsMu.Unlock()
		}
	}
	if useTLS {
		hs.StartTLS()
		cfg.BaseURL.Scheme = "https"
	} else {
		hs.Start()
	}
	cfg.BaseURL.Host = hs.Listener.Addr().String()
	ts := &testServer{Server: srv, url: hs.URL, m: m, rt: rt, exit: func() {
		connsMu.Lock()
		defer connsMu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}}
	ts.stop = func() { _ = srv.Stop(); hs.Close() }
	t.Cleanup(ts.stop)
	return ts
}

func tcpEcho(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

func (ts *testServer) execURL(t *testing.T, tty, stdin, stderr bool, cmd ...string) string {
	t.Helper()
	resp, err := ts.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: cmd, Tty: tty, Stdin: stdin, Stdout: true, Stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Url
}

// open is the number of natively served sessions open now, every kind.
func (ts *testServer) open() float64 {
	n := 0.0
	for _, kind := range []string{"exec", "attach", "portforward"} {
		n += testutil.ToFloat64(ts.m.open.WithLabelValues(kind))
	}
	return n
}

// waitIdle waits until no natively served session is open.
func waitIdle(t *testing.T, ts *testServer) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ts.open() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v sessions still open", ts.open())
		}
	}
}

func (ts *testServer) requests(kind, protocol string) float64 {
	return testutil.ToFloat64(ts.m.requests.WithLabelValues(kind, protocol))
}

type result struct {
	stdout, stderr string
	err            error
}

func run(t *testing.T, protocol, rawURL string, stdin io.Reader, tty bool, sizes remotecommand.TerminalSizeQueue) result {
	t.Helper()
	var exec remotecommand.Executor
	var err error
	cfg := &rest.Config{Host: "http://unused", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	switch protocol {
	case "v5":
		exec, err = remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, rawURL)
	case "v4-websocket":
		exec, err = remotecommand.NewWebSocketExecutorForProtocols(cfg, http.MethodGet, rawURL, "v4.channel.k8s.io")
	case "spdy":
		exec, err = remotecommand.NewSPDYExecutor(cfg, http.MethodPost, mustParse(rawURL))
	}
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	opts := remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Tty: tty, TerminalSizeQueue: sizes}
	if !tty {
		opts.Stderr = &errb
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = exec.StreamWithContext(ctx, opts)
	return result{out.String(), errb.String(), err}
}

func mustParse(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

func exitCode(err error) int {
	var ce interface{ ExitStatus() int } // client-go's exec.CodeExitError
	if errors.As(err, &ce) {
		return ce.ExitStatus()
	}
	if err == nil {
		return 0
	}
	return -1
}

// TestV5Native: client-go's v5 executor straight at the runtime URL is
// served here, not by cri-streaming (which answers 403): stdout and stderr
// apart, exit codes, stdin half-closed with output after it, every line
// before the status.
func TestV5Native(t *testing.T) {
	ts := start(t, nil)
	r := run(t, "v5", ts.execURL(t, false, false, true, "exit", "3"), nil, false, nil)
	if exitCode(r.err) != 3 || r.stdout != "bye\n" || r.stderr != "err\n" {
		t.Fatalf("exit: %+v", r)
	}
	in := strings.Repeat("stdin then EOF\n", 10000)
	r = run(t, "v5", ts.execURL(t, false, true, false, "cat"), strings.NewReader(in), false, nil)
	if r.err != nil || r.stdout != in {
		t.Fatalf("cat: err %v, %d of %d bytes", r.err, len(r.stdout), len(in))
	}
	r = run(t, "v5", ts.execURL(t, false, false, false, "lines", "200000"), nil, false, nil)
	if r.err != nil || strings.Count(r.stdout, "\n") != 200000 {
		t.Fatalf("lines: err %v, %d lines", r.err, strings.Count(r.stdout, "\n"))
	}
	r = run(t, "v5", ts.execURL(t, false, false, false, "fail"), nil, false, nil)
	if r.err == nil || !strings.Contains(r.err.Error(), "runtime broke") {
		t.Fatalf("a runtime error reaches the client: %v", r.err)
	}
	if got := ts.requests("exec", ProtocolV5); got != 4 {
		t.Fatalf("v5 requests %v, want 4", got)
	}
}

type sizeQueue struct {
	sizes chan *remotecommand.TerminalSize
}

func (q sizeQueue) Next() *remotecommand.TerminalSize { return <-q.sizes }

// TestV5Resize: a tty session's resize messages reach the runtime.
func TestV5Resize(t *testing.T) {
	ts := start(t, nil)
	q := sizeQueue{make(chan *remotecommand.TerminalSize, 1)}
	q.sizes <- &remotecommand.TerminalSize{Width: 123, Height: 45}
	r := run(t, "v5", ts.execURL(t, true, false, false, "resize"), nil, true, q)
	close(q.sizes)
	if r.err != nil || r.stdout != "123x45" {
		t.Fatalf("resize: %+v", r)
	}
}

// TestOtherProtocolsUnchanged: SPDY and the legacy WebSocket protocol are
// cri-streaming's, behind the same tokens.
func TestOtherProtocolsUnchanged(t *testing.T) {
	ts := start(t, nil)
	for _, p := range []string{"spdy", "v4-websocket"} {
		r := run(t, p, ts.execURL(t, false, false, true, "exit", "7"), nil, false, nil)
		if exitCode(r.err) != 7 || r.stdout != "bye\n" {
			t.Fatalf("%s: %+v", p, r)
		}
	}
	if ts.requests("exec", "v4.channel.k8s.io") != 2 || ts.requests("exec", ProtocolV5) != 0 {
		t.Fatalf("requests by protocol: v4 %v, v5 %v", ts.requests("exec", "v4.channel.k8s.io"), ts.requests("exec", ProtocolV5))
	}
}

// TestCRIStreamingOnly: without v5 in the supported protocols the server is
// cri-streaming: a v5-only offer is refused with 403.
func TestCRIStreamingOnly(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.SupportedRemoteCommandProtocols = without(c.SupportedRemoteCommandProtocols, ProtocolV5)
	})
	r := run(t, "v5", ts.execURL(t, false, false, false, "lines", "1"), nil, false, nil)
	if r.err == nil || !strings.Contains(r.err.Error(), "403") {
		t.Fatalf("v5 against a cri-streaming-only server: %v", r.err)
	}
}

// TestTokens: single use, a minute, 1000 in flight; unknown or spent → 404.
func TestTokens(t *testing.T) {
	ts := start(t, nil)
	u := ts.execURL(t, false, false, false, "lines", "1")
	if r := run(t, "v5", u, nil, false, nil); r.err != nil {
		t.Fatal(r.err)
	}
	for _, raw := range []string{u, ts.url + "/exec/nosuchtk"} {
		resp, err := http.Get(raw)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", raw, resp.StatusCode)
		}
	}
	srv := ts.Server.(*runtimeServer)
	now := time.Now()
	srv.tokens.now = func() time.Time { return now }
	expired := ts.execURL(t, false, false, false, "lines", "1")
	now = now.Add(tokenTTL + time.Second)
	if r := run(t, "v5", expired, nil, false, nil); r.err == nil || !strings.Contains(r.err.Error(), "404") {
		t.Fatalf("expired URL: %v", r.err)
	}
	for i := 0; i < maxInFlight; i++ {
		ts.execURL(t, false, false, false, "lines", "1")
	}
	_, err := ts.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"x"}, Stdout: true})
	if grpcstatus.Code(err) != codes.ResourceExhausted {
		t.Fatalf("request 1001: %v", err)
	}
	if _, err := ts.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"x"}, Tty: true, Stderr: true}); grpcstatus.Code(err) != codes.InvalidArgument {
		t.Fatalf("tty and stderr: %v", err)
	}
}

// TestTunnelAndSPDYPortForward: client-go's tunneling dialer is served
// natively, its SPDY dialer by cri-streaming; several connections at once.
func TestTunnelAndSPDYPortForward(t *testing.T) {
	ts := start(t, nil)
	for _, protocol := range []string{"websocket", "spdy"} {
		ports, stop, errc := forward(t, ts, protocol, 80)
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]))
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				msg := bytes.Repeat([]byte{byte('a' + i)}, 100000)
				go func() { _, _ = c.Write(msg) }()
				got := make([]byte, len(msg))
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
					t.Errorf("%s connection %d: %v", protocol, i, err)
				}
			})
		}
		wg.Wait()
		stop()
		<-errc
	}
	if ts.requests("portforward", ProtocolTunnel) != 1 || ts.requests("portforward", "portforward.k8s.io") != 1 {
		t.Fatalf("port-forward requests: tunnel %v, spdy %v", ts.requests("portforward", ProtocolTunnel), ts.requests("portforward", "portforward.k8s.io"))
	}
}

// TestClientLeaves: a client gone mid-session ends the runtime's call
// (through its context) and the connection, leaving nothing behind (the
// package's leak check).
func TestClientLeaves(t *testing.T) {
	ts := start(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	exec, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: "http://unused"}, http.MethodGet, ts.execURL(t, false, true, false, "sleep"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		done <- exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: pr, Stdout: io.Discard})
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("client did not end")
	}
	waitIdle(t, ts)
}

// TestV5OverTLS: a runtime serving its URLs over TLS (containerd's
// enable_tls_streaming) gets the same v5 sessions; output goes through the
// copying write path there.
func TestV5OverTLS(t *testing.T) {
	ts := startServer(t, nil, true)
	r := run(t, "v5", ts.execURL(t, false, false, true, "exit", "5"), nil, false, nil)
	if exitCode(r.err) != 5 || r.stdout != "bye\n" || r.stderr != "err\n" {
		t.Fatalf("exit over TLS: %+v", r)
	}
	r = run(t, "v5", ts.execURL(t, false, false, false, "lines", "100000"), nil, false, nil)
	if r.err != nil || strings.Count(r.stdout, "\n") != 100000 {
		t.Fatalf("lines over TLS: err %v, %d lines", r.err, strings.Count(r.stdout, "\n"))
	}
}

// TestStopEndsSessions: Stop ends a natively served session through its
// context: the client hears why, with a close handshake, and the
// runtime's call ends.
func TestStopEndsSessions(t *testing.T) {
	ts := start(t, nil)
	u := ts.execURL(t, false, true, false, "sleep")
	done := make(chan result, 1)
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { done <- run(t, "v5", u, pr, false, nil) }()
	for deadline := time.Now().Add(10 * time.Second); ts.open() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the session never started")
		}
	}
	_ = ts.Stop()
	select {
	case r := <-done:
		if r.err == nil || !strings.Contains(r.err.Error(), "streaming server shutting down") {
			t.Fatalf("session ended with %v; want the shutdown status", r.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the session outlived Stop")
	}
}

// TestProtocolErrorIsNeverSuccess: a client that breaks v5 (a message on
// an unknown channel) while a process reads its stdin gets BadRequest, and
// the process never sees a clean EOF for the input that was cut off: it is
// killed first. Before, stdin was closed first: cat exited 0 and its
// Success could win the race to the status (1 to 25 in 1,000 here), and
// the fake counts every clean EOF whether or not the race is lost.
func TestProtocolErrorIsNeverSuccess(t *testing.T) {
	ts := start(t, nil)
	d := websocket.Dialer{Subprotocols: []string{"v5.channel.k8s.io"}}
	const runs = 300
	for i := range runs {
		// Each URL serves one session.
		u := strings.Replace(ts.execURL(t, false, true, false, "eof-cat"), "http", "ws", 1)
		c, _, err := d.Dial(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range [][]byte{{9, 'x'}, append([]byte{0}, "ping\n"...), {255, 0}} {
			if err := c.WriteMessage(websocket.BinaryMessage, m); err != nil {
				break // the server may have closed already
			}
		}
		var status []byte
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			_, m, err := c.ReadMessage()
			if err != nil {
				break
			}
			if len(m) > 0 && m[0] == 3 {
				status = m[1:]
			}
		}
		c.Close()
		if !bytes.Contains(status, []byte(`"reason":"BadRequest"`)) || !bytes.Contains(status, []byte("unknown client channel 9")) {
			t.Fatalf("run %d: status %s, want Failure/BadRequest for channel 9", i, status)
		}
	}
	waitIdle(t, ts)
	ts.rt.mu.Lock()
	defer ts.rt.mu.Unlock()
	if ts.rt.cleanEOFs != 0 {
		t.Fatalf("%d of %d processes read a clean EOF on input the client's protocol error cut off", ts.rt.cleanEOFs, runs)
	}
}

// pattern is n bytes of stream's own text: a byte moved, lost or crossed
// between streams shows.
func pattern(stream string, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s %08d\n", stream, i)
	}
	return b.Bytes()[:n]
}

// pipeOutput is a process whose stdout and stderr each write n bytes
// (cmd[2], a size) into a pipe the runtime copies to the session with
// io.Copy, as containerd copies a process's FIFOs. kind (cmd[1]) says what
// the source is: "pipe" (Go's pollable pipe), "blocking" (a blocking pipe
// descriptor, which Go's poller does not watch), "file" (a regular file:
// no splice), "trickle" (a pipe written 4 KiB every 50 ms).
func pipeOutput(kind, size string, out, errw io.Writer) error {
	n, _ := strconv.Atoi(size)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, s := range []struct {
		name string
		w    io.Writer
	}{{"stdout", out}, {"stderr", errw}} {
		if s.w == nil {
			continue
		}
		data := pattern(s.name, n)
		r, w, err := source(kind, data)
		if err != nil {
			return err
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer r.Close()
			_, err := io.Copy(s.w, r)
			errs <- err
		}()
		go func() {
			defer wg.Done()
			if w == nil {
				return
			}
			defer w.Close()
			for p := data; len(p) > 0; {
				k := len(p)
				if kind == "trickle" {
					k = min(k, 4096)
					time.Sleep(50 * time.Millisecond)
				}
				if _, err := w.Write(p[:k]); err != nil {
					errs <- err
					return
				}
				p = p[k:]
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// source is kind's reader of data, and the writer that fills it (nil for a
// file, already written).
func source(kind string, data []byte) (io.ReadCloser, io.WriteCloser, error) {
	switch kind {
	case "file":
		f, err := os.CreateTemp("", "kubestream-output-")
		if err != nil {
			return nil, nil, err
		}
		_ = os.Remove(f.Name())
		if _, err := f.Write(data); err != nil {
			return nil, nil, err
		}
		_, err = f.Seek(0, io.SeekStart)
		return f, nil, err
	case "blocking":
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
			return nil, nil, err
		}
		return os.NewFile(uintptr(p[0]), "blocking-r"), os.NewFile(uintptr(p[1]), "blocking-w"), nil
	}
	return os.Pipe()
}

func (ts *testServer) output(path string) float64 {
	return testutil.ToFloat64(ts.m.out.WithLabelValues(path))
}

// TestOutputFromPipes: a runtime that copies a process's output from a
// pipe with io.Copy (containerd does, from its FIFOs) has it moved to the
// client by the kernel on a plain connection, the counter says so, and the
// client sees every byte, each stream on its own channel, before the
// status. A regular file, a blocking descriptor and a TLS connection take
// the copying path or the blocking splice with the same result.
func TestOutputFromPipes(t *testing.T) {
	const n = 3<<20 + 123
	want := map[string]string{"stdout": string(pattern("stdout", n)), "stderr": string(pattern("stderr", n))}
	for _, c := range []struct {
		kind   string
		tls    bool
		kernel bool
	}{
		{"pipe", false, true},
		{"blocking", false, true},
		{"file", false, false},
		{"pipe", true, false},
	} {
		t.Run(fmt.Sprintf("%s,tls=%v", c.kind, c.tls), func(t *testing.T) {
			ts := startServer(t, nil, c.tls)
			r := run(t, "v5", ts.execURL(t, false, false, true, "pipes", c.kind, strconv.Itoa(n)), nil, false, nil)
			if r.err != nil || r.stdout != want["stdout"] || r.stderr != want["stderr"] {
				t.Fatalf("err %v; stdout %d bytes (exact %v), stderr %d bytes (exact %v)", r.err,
					len(r.stdout), r.stdout == want["stdout"], len(r.stderr), r.stderr == want["stderr"])
			}
			kernel, copied := ts.output("kernel"), ts.output("copy")
			if c.kernel && (kernel != 2*n || copied != 0) || !c.kernel && (kernel != 0 || copied != 2*n) {
				t.Fatalf("output by path: kernel %v, copy %v; want all %d by the kernel: %v", kernel, copied, 2*n, c.kernel)
			}
		})
	}
}

// TestSplicedOutputKeepsSessionAlive: bytes the kernel moves count as the
// session's activity, so output trickling for longer than the idle timeout
// keeps the session open to the end.
func TestSplicedOutputKeepsSessionAlive(t *testing.T) {
	ts := start(t, func(c *Config) { c.StreamIdleTimeout = time.Second })
	const n = 4096 * 60 // 60 writes 50 ms apart: 3 s
	r := run(t, "v5", ts.execURL(t, false, false, false, "pipes", "trickle", strconv.Itoa(n)), nil, false, nil)
	if r.err != nil || r.stdout != string(pattern("stdout", n)) {
		t.Fatalf("err %v, %d of %d bytes", r.err, len(r.stdout), n)
	}
	if got := ts.output("kernel"); got != n {
		t.Fatalf("kernel path carried %v bytes, want %d", got, n)
	}
}

// TestStdinWholeMessages: a stdin message reaches the process in one write
// however many frames it came in (gorilla's client sends one per 4 KiB of
// its write buffer, and a proxy may cut them finer): a runtime writes each
// to the process's FIFO as it comes, a system call for it and the shim.
func TestStdinWholeMessages(t *testing.T) {
	ts := start(t, nil)
	d := websocket.Dialer{Subprotocols: []string{"v5.channel.k8s.io"}, WriteBufferSize: 4096}
	c, _, err := d.Dial(strings.Replace(ts.execURL(t, false, true, false, "readsizes"), "http", "ws", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := append([]byte{0}, bytes.Repeat([]byte("x"), 32<<10)...)
	for range 3 {
		if err := c.WriteMessage(websocket.BinaryMessage, msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WriteMessage(websocket.BinaryMessage, []byte{255, 0}); err != nil {
		t.Fatal(err)
	}
	var stdout []byte
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, m, err := c.ReadMessage()
		if err != nil {
			break
		}
		if len(m) > 0 && m[0] == 1 {
			stdout = append(stdout, m[1:]...)
		}
	}
	if got, want := string(stdout), strings.Repeat("32768\n", 3); got != want {
		t.Fatalf("the process read stdin in pieces %q, want three whole messages %q", got, want)
	}
}
