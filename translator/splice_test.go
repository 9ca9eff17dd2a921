// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/remotecommand"

	"github.com/kubestream/kubestream/internal/wire"
	"github.com/kubestream/kubestream/internal/wiretest"
)

// TestFrameFollower: boundaries are found whatever the read sizes, across
// 7-bit, 16-bit and 64-bit lengths, and a close frame is noticed.
func TestFrameFollower(t *testing.T) {
	var stream []byte
	var ends []int // offsets where a frame ends
	for _, n := range []int{0, 5, 125, 126, 300, 65535, 65536, 70000} {
		stream = wire.ServerFrame(stream, websocket.BinaryMessage, make([]byte, n))
		ends = append(ends, len(stream))
	}
	withClose := wire.ServerFrame(append([]byte(nil), stream...), websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""))
	for _, chunk := range []int{1, 2, 3, 7, 100, 4096, 1 << 20} {
		var f frameFollower
		fed, next := 0, 0
		for fed < len(stream) {
			k := min(chunk, len(stream)-fed)
			f.follow(stream[fed : fed+k])
			fed += k
			for next < len(ends) && ends[next] < fed {
				next++
			}
			atEnd := next < len(ends) && ends[next] == fed
			if f.AtBoundary() != atEnd {
				t.Fatalf("chunk %d, offset %d: atBoundary %v, want %v", chunk, fed, f.AtBoundary(), atEnd)
			}
		}
		if f.sawClose {
			t.Fatalf("chunk %d: close seen in a stream without one", chunk)
		}
		var g frameFollower
		for i := 0; i < len(withClose); i += chunk {
			g.follow(withClose[i:min(i+chunk, len(withClose))])
		}
		if !g.sawClose || !g.AtBoundary() {
			t.Fatalf("chunk %d: close frame not followed", chunk)
		}
	}
}

// TestEndFrames: what a client hears when the runtime could not say it.
func TestEndFrames(t *testing.T) {
	ops, payloads := wiretest.ServerFrames(t, endFrames(remotecommand.StreamProtocolV5Name, "container runtime connection lost"))
	if len(ops) != 2 || ops[0] != websocket.BinaryMessage || ops[1] != websocket.CloseMessage || payloads[0][0] != ChanError {
		t.Fatalf("v5: opcodes %v", ops)
	}
	var st metav1.Status
	if err := json.Unmarshal(payloads[0][1:], &st); err != nil || st.Reason != metav1.StatusReasonInternalError || st.Message != "container runtime connection lost" {
		t.Fatalf("v5 status %+v (%v)", st, err)
	}
	ops, payloads = wiretest.ServerFrames(t, endFrames(portforward.WebsocketsSPDYTunnelingPortForwardV1, string(bytes.Repeat([]byte("x"), 200))))
	if len(ops) != 1 || ops[0] != websocket.CloseMessage || binary.BigEndian.Uint16(payloads[0]) != websocket.CloseInternalServerErr || len(payloads[0]) > 125 {
		t.Fatalf("tunnel: opcodes %v, close payload %d bytes", ops, len(payloads[0]))
	}
}

// waitTaken waits until c's reader has taken every byte sent to it: its
// socket's receive queue is empty (SIOCINQ).
func waitTaken(t *testing.T, c net.Conn) {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var queued int
		var ioctlErr error
		if err := raw.Control(func(fd uintptr) { queued, ioctlErr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
			t.Fatal(err)
		}
		switch {
		case ioctlErr != nil:
			t.Fatalf("SIOCINQ: %v", ioctlErr)
		case queued == 0:
			return
		case time.Now().After(deadline):
			t.Fatalf("%d bytes still queued after 10s", queued)
		}
	}
}

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

type wireFrame struct {
	op      int
	payload []byte
}

// readServerFrames parses unmasked frames until a close frame or an error.
func readServerFrames(r io.Reader) ([]wireFrame, error) {
	br := bufio.NewReader(r)
	var out []wireFrame
	for {
		f, err := readServerFrame(br)
		if err != nil {
			return out, err
		}
		out = append(out, f)
		if f.op == websocket.CloseMessage {
			return out, nil
		}
	}
}

// readServerFrame parses one unmasked frame.
func readServerFrame(br *bufio.Reader) (wireFrame, error) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return wireFrame{}, err
	}
	n := int64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		if _, err := io.ReadFull(br, l[:]); err != nil {
			return wireFrame{}, err
		}
		n = int64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		if _, err := io.ReadFull(br, l[:]); err != nil {
			return wireFrame{}, err
		}
		n = int64(binary.BigEndian.Uint64(l[:]))
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(br, p); err != nil {
		return wireFrame{}, err
	}
	return wireFrame{int(h[0] & 0x0f), p}, nil
}

// TestSpliceKeepaliveMidFrame: a runtime that sends half a frame and
// stalls holds up neither the node's pings to the client (v5) nor its
// pongs to the client's pings (legacy), and the frame still reaches the
// client whole, with no ping inside it, once the runtime sends the rest.
func TestSpliceKeepaliveMidFrame(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, proto := range []string{remotecommand.StreamProtocolV5Name, remotecommand.StreamProtocolV4Name} {
		t.Run(proto, func(t *testing.T) {
			clientApp, clientConn := tcpPair(t)
			rtConn, runtimeApp := tcpPair(t)
			cfg := DefaultConfig()
			cfg.PingPeriod = 50 * time.Millisecond
			done := make(chan SpliceResult, 1)
			go func() { done <- Splice(context.Background(), clientConn, rtConn, proto, cfg, nil) }()
			defer func() {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Error("Splice did not return")
				}
			}()
			defer clientApp.Close()
			defer runtimeApp.Close()

			out := wire.ServerFrame(nil, websocket.BinaryMessage, append([]byte{ChanStdout}, bytes.Repeat([]byte("x"), 1000)...))
			if _, err := runtimeApp.Write(out[:300]); err != nil {
				t.Fatal(err)
			}
			want := websocket.PingMessage
			if proto == remotecommand.StreamProtocolV4Name {
				want = websocket.PongMessage
				time.Sleep(50 * time.Millisecond) // the half frame is in
				if _, err := clientApp.Write(wiretest.MaskedFrame(true, websocket.PingMessage, []byte("hi"))); err != nil {
					t.Fatal(err)
				}
			}
			br := bufio.NewReader(clientApp)
			_ = clientApp.SetReadDeadline(time.Now().Add(20 * cfg.PingPeriod))
			for {
				f, err := readServerFrame(br)
				if err != nil {
					t.Fatalf("waiting for opcode %d with the runtime stalled mid-frame: %v", want, err)
				}
				if f.op == want {
					break
				}
			}
			if _, err := runtimeApp.Write(out[300:]); err != nil {
				t.Fatal(err)
			}
			for {
				f, err := readServerFrame(br)
				if err != nil {
					t.Fatalf("waiting for the output: %v", err)
				}
				if f.op == websocket.BinaryMessage {
					if !bytes.Equal(f.payload, out[4:]) {
						t.Fatalf("output of %d bytes, want %d", len(f.payload), len(out)-4)
					}
					break
				}
			}
		})
	}
}

// TestSpliceShutdownMidFrame: the node shuts down while the runtime is
// half-way through a frame. The client still gets that frame whole, then
// the status saying why the session ended and a close frame, not a cut.
func TestSpliceShutdownMidFrame(t *testing.T) {
	defer goleak.VerifyNone(t)
	clientApp, clientConn := tcpPair(t)
	rtConn, runtimeApp := tcpPair(t)
	cfg := DefaultConfig()
	cfg.CloseGrace = 5 * time.Second

	out := wire.ServerFrame(nil, websocket.BinaryMessage, append([]byte{ChanStdout}, bytes.Repeat([]byte("x"), 1000)...))
	if _, err := runtimeApp.Write(out[:300]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan SpliceResult, 1)
	go func() { done <- Splice(ctx, clientConn, rtConn, remotecommand.StreamProtocolV5Name, cfg, nil) }()

	waitTaken(t, rtConn) // the first part is through
	cancel()
	time.Sleep(50 * time.Millisecond) // the reader has been woken
	if _, err := runtimeApp.Write(out[300:]); err != nil {
		t.Fatal(err)
	}

	_ = clientApp.SetReadDeadline(time.Now().Add(10 * time.Second))
	frames, err := readServerFrames(clientApp)
	if err != nil {
		t.Fatalf("after %d frames: %v", len(frames), err)
	}
	if len(frames) != 3 {
		t.Fatalf("got %d frames, want output, status and close", len(frames))
	}
	if !bytes.Equal(frames[0].payload, out[4:]) {
		t.Errorf("the frame in flight arrived cut: %d payload bytes", len(frames[0].payload))
	}
	var st metav1.Status
	if frames[1].payload[0] != ChanError || json.Unmarshal(frames[1].payload[1:], &st) != nil || st.Status != metav1.StatusFailure ||
		!strings.Contains(st.Message, "shutting down") {
		t.Errorf("status frame %q", frames[1].payload)
	}
	if frames[2].op != websocket.CloseMessage {
		t.Errorf("last frame opcode %d, want close", frames[2].op)
	}
	clientApp.Close()
	select {
	case res := <-done:
		if res.RuntimeLost {
			t.Error("a shutdown was reported as a lost runtime")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Splice did not return after the client closed")
	}
}

// TestSpliceLegacyCutSession: a v4.channel.k8s.io runtime that goes away
// before its status (a v4 runtime always sends one, success included) is
// reported to the client as a failure, not left as a bare close a client
// reads as success; a runtime that sent its status gets nothing added.
func TestSpliceLegacyCutSession(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, withStatus := range []bool{false, true} {
		clientApp, clientConn := tcpPair(t)
		rtConn, runtimeApp := tcpPair(t)
		done := make(chan SpliceResult, 1)
		go func() {
			done <- Splice(context.Background(), clientConn, rtConn, remotecommand.StreamProtocolV4Name, DefaultConfig(), nil)
		}()
		out := wire.ServerFrame(nil, websocket.BinaryMessage, append([]byte{ChanStdout}, "tick\n"...))
		if withStatus {
			out = wire.ServerFrame(out, websocket.BinaryMessage, wire.StatusFrame(&metav1.Status{Status: metav1.StatusSuccess}))
		}
		if _, err := runtimeApp.Write(out); err != nil {
			t.Fatal(err)
		}
		runtimeApp.Close() // the runtime restarts: a bare close
		_ = clientApp.SetReadDeadline(time.Now().Add(10 * time.Second))
		frames, _ := readServerFrames(clientApp) // the node closes the connection after
		clientApp.Close()
		res := <-done
		var st metav1.Status
		switch {
		case withStatus && (len(frames) != 2 || res.RuntimeLost):
			t.Fatalf("with a status: %d frames, runtime lost %v", len(frames), res.RuntimeLost)
		case withStatus:
		case len(frames) != 2 || frames[1].payload[0] != ChanError || json.Unmarshal(frames[1].payload[1:], &st) != nil ||
			st.Status != metav1.StatusFailure || st.Reason != metav1.StatusReasonInternalError || !res.RuntimeLost:
			t.Fatalf("without a status: %d frames (%v), runtime lost %v", len(frames), frames, res.RuntimeLost)
		}
	}
}
