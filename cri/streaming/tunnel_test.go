// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criportforward "k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wiretest"
)

// dialTunnel opens a tunnel session with client-go's tunneling dialer,
// as kubectl's port-forward does, and returns its SPDY connection.
func dialTunnel(t *testing.T, ts *testServer) httpstream.Connection {
	t.Helper()
	resp, err := ts.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "p1", Port: []int32{80}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := portforward.NewSPDYOverWebsocketDialer(mustParse(resp.Url), &rest.Config{Host: "http://unused"})
	if err != nil {
		t.Fatal(err)
	}
	conn, _, err := d.Dial(criportforward.ProtocolV1Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// openPair opens a forwarded connection's error stream (half-closed at
// once, as client-go does) and data stream, and returns both.
func openPair(t *testing.T, conn httpstream.Connection, port, request string) (errs, data httpstream.Stream) {
	t.Helper()
	errs, err := createStream(conn, criportforward.StreamTypeError, port, request)
	if err != nil {
		t.Fatal(err)
	}
	_ = errs.Close()
	data, err = createStream(conn, criportforward.StreamTypeData, port, request)
	if err != nil {
		t.Fatal(err)
	}
	return errs, data
}

func createStream(conn httpstream.Connection, typ, port, request string) (httpstream.Stream, error) {
	h := http.Header{}
	h.Set(criportforward.StreamType, typ)
	h.Set(criportforward.PortHeader, port)
	h.Set(criportforward.PortForwardRequestIDHeader, request)
	return conn.CreateStream(h)
}

// readAll is io.ReadAll with a deadline: a stream that never ends fails
// the test instead of hanging it.
func readAll(t *testing.T, r io.Reader) (string, error) {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	c := make(chan res, 1)
	go func() {
		b, err := io.ReadAll(r)
		c <- res{b, err}
	}()
	select {
	case r := <-c:
		return string(r.b), r.err
	case <-time.After(10 * time.Second):
		t.Fatal("stream did not end")
		return "", nil
	}
}

// TestTunnelStreams: the tunnel's streams behave as cri-streaming's do
// for client-go: the runtime's error on the error stream in its words, a
// half-closed data stream still carries the reply, a stream with bad
// headers is refused without ending the session, and a stream whose pair
// never comes is reset after the creation timeout.
func TestTunnelStreams(t *testing.T) {
	ts := start(t, func(c *Config) { c.StreamCreationTimeout = 2 * time.Second }) // long past a pair's two round trips on a loaded machine
	conn := dialTunnel(t, ts)

	t.Run("runtime error", func(t *testing.T) {
		errs, data := openPair(t, conn, "1", "0")
		msg, _ := readAll(t, errs)
		if want := "error forwarding port 1 to pod p1, uid : nothing listens on port 1"; msg != want {
			t.Fatalf("error stream %q, want %q", msg, want)
		}
		if got, _ := readAll(t, data); got != "" {
			t.Fatalf("data stream carried %q", got)
		}
	})

	t.Run("client reset", func(t *testing.T) {
		// client-go resets the data stream when its local connection goes
		// away mid-download (Kubernetes' e2e "port-forward should keep
		// working after detect broken connection"), then reads the error
		// stream to its end; a message there would end its whole session.
		errs, data := openPair(t, conn, "3", "6")
		if _, err := io.ReadFull(data, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		if err := data.Reset(); err != nil {
			t.Fatal(err)
		}
		if msg, _ := readAll(t, errs); msg != "" {
			t.Fatalf("error stream after the client's reset: %q", msg)
		}
	})

	t.Run("half-closed", func(t *testing.T) {
		errs, data := openPair(t, conn, "80", "1")
		sent := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 KB: several inboxes' worth
		go func() {
			_, _ = data.Write(sent)
			_ = data.Close() // the runtime reads EOF, and still answers
		}()
		got, err := readAll(t, data)
		if err != nil || got != string(sent) {
			t.Fatalf("echo of %d bytes after half-close: %d bytes, %v", len(sent), len(got), err)
		}
		if msg, _ := readAll(t, errs); msg != "" {
			t.Fatalf("error stream %q", msg)
		}
	})

	t.Run("bad headers", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			st, err := createStream(conn, criportforward.StreamTypeData, "0", "2")
			if err == nil {
				_, err = st.Read(make([]byte, 1))
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a stream for port 0 was served")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a stream for port 0 was neither refused nor reset")
		}
	})

	t.Run("unpaired", func(t *testing.T) {
		errs, err := createStream(conn, criportforward.StreamTypeError, "80", "3")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, _ = readAll(t, errs) // ends when the server resets it
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("unpaired stream reset after %v", d)
		}
	})

	t.Run("data on the error stream", func(t *testing.T) {
		// Nothing reads an error stream: what a client writes on one is
		// dropped, and holds up neither the session nor its data stream.
		errs, err := createStream(conn, criportforward.StreamTypeError, "80", "5")
		if err != nil {
			t.Fatal(err)
		}
		data, err := createStream(conn, criportforward.StreamTypeData, "80", "5")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := errs.Write(make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		_ = errs.Close()
		go func() { _, _ = data.Write([]byte("past the error stream")); _ = data.Close() }()
		if got, _ := readAll(t, data); got != "past the error stream" {
			t.Fatalf("data stream after 1 MiB on the error stream: %q", got)
		}
	})

	// The session outlived everything above.
	_, data := openPair(t, conn, "80", "4")
	go func() { _, _ = data.Write([]byte("still here")); _ = data.Close() }()
	if got, _ := readAll(t, data); got != "still here" {
		t.Fatalf("after the subtests: %q", got)
	}
}

// TestTunnelBackpressure: a runtime that does not read holds the client's
// writes back (the server buffers an inbox per stream, not what the client
// sends), and past the stall limit that one stream is reset, so the
// session goes on and still notices its client leave.
func TestTunnelBackpressure(t *testing.T) {
	ts := start(t, func(c *Config) { c.Limits.PingPeriod, c.Limits.PongTimeout = 3*time.Second, 3*time.Second })
	conn := dialTunnel(t, ts)
	_, data := openPair(t, conn, "2", "0")
	const total = 64 << 20
	var written atomic.Int64
	writerDone := make(chan struct{})
	go func() {
		chunk := make([]byte, 32<<10)
		defer close(writerDone)
		for written.Load() < total {
			n, err := data.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	time.Sleep(2 * time.Second)
	// Loopback socket buffers hold a few MiB; without the bound, the
	// server would have taken all 64.
	if w := written.Load(); w > 16<<20 {
		t.Fatalf("the client wrote %d MiB into a stream nobody reads", w>>20)
	}
	// The stall limit is 3 s here: the stream is reset (the client's
	// reads end; spdystream's writes to a reset stream still succeed, and
	// the server drops them).
	start := time.Now()
	_, _ = readAll(t, data)
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("the stalled stream was reset after %v", d)
	}
	<-writerDone
	// The session still serves.
	_, data2 := openPair(t, conn, "80", "1")
	go func() { _, _ = data2.Write([]byte("after")); _ = data2.Close() }()
	if got, _ := readAll(t, data2); got != "after" {
		t.Fatalf("after the reset: %q", got)
	}
	conn.Close()
}

// FuzzTunnelClient: the tunnel's reading of a client (WebSocket messages
// carrying SPDY frames, compressed header blocks, stream IDs, resets)
// against arbitrary bytes ends, never panics, hangs or leaves a forward
// running.
func FuzzTunnelClient(f *testing.F) {
	syn := func(id uint32, first bool, typ string) []byte {
		return spdy.AppendHeaders(nil, spdy.TypeSynStream, []byte{0, 0, 0, byte(id), 0, 0, 0, 0, 0, 0}, first, "streamtype", typ, "port", "80", "requestid", "0")
	}
	data := func(id uint32, p string, fin bool) []byte {
		b := make([]byte, spdy.HeaderLen, spdy.HeaderLen+len(p))
		spdy.PutDataHeader(b, id, len(p), fin)
		return append(b, p...)
	}
	msg := func(p ...[]byte) []byte { return wiretest.MaskedFrame(true, 2, bytes.Join(p, nil)) }
	rst := append(spdy.AppendControl(nil, spdy.TypeRstStream, 0, 8), 0, 0, 0, 3, 0, 0, 0, 5)
	ping := append(spdy.AppendControl(nil, spdy.TypePing, 0, 4), 0, 0, 0, 1)
	f.Add(bytes.Join([][]byte{msg(syn(1, true, "error")), msg(syn(3, false, "data")), msg(data(3, "hello", true))}, nil))
	f.Add(bytes.Join([][]byte{msg(syn(1, true, "error"), syn(3, false, "data")[:11]), msg(syn(3, false, "data")[11:]), msg(rst, ping)}, nil))
	f.Add(msg(syn(3, true, "data"), syn(1, false, "error")))
	f.Add(msg(data(7, strings.Repeat("x", 100), false)))
	cfg := DefaultConfig()
	cfg.StreamCreationTimeout = 50 * time.Millisecond
	limits := cfg.Limits.wire(cfg.StreamIdleTimeout) // as NewServer sets them: zero limits refuse every message
	f.Fuzz(func(t *testing.T, in []byte) {
		s := &backend{config: cfg, limits: limits, runtime: &fakeRuntime{echo: "127.0.0.1:1"}, ctx: context.Background()}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.runTunnel(wiretest.ServerWS(t, &wiretest.LoopConn{Src: in}, 0), "p1", klog.Background())
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the tunnel did not end")
		}
	})
}

// recordConn is a client connection that replays Src and keeps what the
// server writes.
type recordConn struct {
	wiretest.LoopConn
	mu  sync.Mutex
	out []byte
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out = append(c.out, p...)
	return len(p), nil
}

// TestTunnelTextMessage: a text message inside a tunnel breaks its
// protocol: the client is closed with 1002 and told why.
func TestTunnelTextMessage(t *testing.T) {
	syn := spdy.AppendHeaders(nil, spdy.TypeSynStream, []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, true, "streamtype", "error", "port", "80", "requestid", "0")
	conn := &recordConn{LoopConn: wiretest.LoopConn{Src: append(wiretest.MaskedFrame(true, 2, syn), wiretest.MaskedFrame(true, 1, []byte("hello"))...)}}
	cfg := DefaultConfig()
	s := &backend{config: cfg, limits: cfg.Limits.wire(cfg.StreamIdleTimeout), runtime: &fakeRuntime{echo: "127.0.0.1:1"}, ctx: context.Background()}
	s.runTunnel(wiretest.ServerWS(t, conn, 0), "p1", klog.Background())
	conn.mu.Lock()
	out := conn.out
	conn.mu.Unlock()
	_, frames, ok := bytes.Cut(out, []byte("\r\n\r\n")) // after the 101
	if !ok {
		t.Fatalf("no handshake in %q", out)
	}
	ops, payloads := wiretest.ServerFrames(t, frames)
	for i, op := range ops {
		if op == websocket.CloseMessage {
			code := int(payloads[i][0])<<8 | int(payloads[i][1])
			if code != websocket.CloseProtocolError || !strings.Contains(string(payloads[i][2:]), "binary") {
				t.Fatalf("closed with %d %q, want 1002 saying why", code, payloads[i][2:])
			}
			return
		}
	}
	t.Fatalf("no close frame in %v", ops)
}
