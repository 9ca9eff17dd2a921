// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
)

// maskedFrame is a client frame with first byte b0 and an all-zero mask
// key, so the payload goes on the wire as given.
func maskedFrame(b0 byte, payload []byte) []byte {
	f := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	case n < 1<<16:
		f = append(f, 0x80|126, byte(n>>8), byte(n))
	}
	f = append(f, 0, 0, 0, 0)
	return append(f, payload...)
}

// framingErrors are client byte sequences RFC 6455 forbids, each of which
// the node must answer with close 1002 and then free the whole session.
var framingErrors = []struct {
	name  string
	bytes []byte
}{
	{"unmasked frame", []byte{0x82, 0x02, 0x00, 0x78}},
	{"reserved bits set", maskedFrame(0x80|0x40|0x02, []byte{0, 'x'})},
	{"opcode 3", maskedFrame(0x83, []byte{0})},
	{"ping longer than 125 bytes", maskedFrame(0x89, make([]byte, 126))},
	{"fragmented ping", maskedFrame(0x09, []byte{1})},
	{"stray continuation", maskedFrame(0x80, []byte{0, 'x'})},
	{"new message inside a fragmented one", append(maskedFrame(0x02, []byte{0}), maskedFrame(0x82, []byte{0, 'x'})...)},
	{"length with the top bit set", []byte{0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
	{"close frame with a 1-byte payload", maskedFrame(0x88, []byte{3})},
	{"close frame with code 1005", maskedFrame(0x88, []byte{0x03, 0xed})},
	{"close reason not UTF-8", maskedFrame(0x88, []byte{0x03, 0xe8, 0xff, 0xfe})},
}

// TestFramingErrorsEndSession: one malformed frame on exec, attach or the
// port-forward tunnel gets close 1002 and then ends the runtime leg too: no
// session left active, no goroutine held, and the command the exec started
// gone from the process table. (A node that kept the runtime leg would let
// anyone allowed to exec exhaust its descriptors.)
func TestFramingErrorsEndSession(t *testing.T) {
	n := startNode(t)
	before := goleak.IgnoreCurrent()
	for i, fe := range framingErrors {
		marker := fmt.Sprintf("ks-framing-%d-%d", i, time.Now().UnixNano())
		for _, target := range []struct {
			name, path, protocol string
			exec                 bool
		}{
			{"exec", "/exec/default/demo/app?command=sh&command=-c&command=cat%3B+%3A+" + marker + "&input=1&output=1&error=1", "v5.channel.k8s.io", true},
			{"attach", "/attach/default/demo/app?input=1&output=1&error=1", "v5.channel.k8s.io", false},
			{"tunnel", "/portForward/default/demo", "SPDY/3.1+portforward.k8s.io", false},
		} {
			t.Run(target.name+"/"+fe.name, func(t *testing.T) {
				fds := openFDs(t)
				c := n.wsDial(t, target.path, target.protocol)
				if target.protocol == "v5.channel.k8s.io" {
					// The session is up (the runtime leg open) once the
					// readiness message arrives.
					_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
					if _, _, err := c.ReadMessage(); err != nil {
						t.Fatalf("no readiness message: %v", err)
					}
					if target.exec {
						waitFor(t, 10*time.Second, func() bool { return processRunning(marker) })
					}
				}
				if _, err := c.NetConn().Write(fe.bytes); err != nil {
					t.Fatal(err)
				}
				if code := closeCode(t, c); code != websocket.CloseProtocolError {
					t.Errorf("close code %d, want 1002", code)
				}
				c.NetConn().Close()
				waitFor(t, 10*time.Second, func() bool { return n.activeSessions() == 0 })
				// The client's and the runtime's descriptors are both given
				// back (this process is the node).
				waitFor(t, 10*time.Second, func() bool { return openFDs(t) <= fds })
				if target.exec && rt.endpoint == "" {
					// The reference runtime ends an exec whose streams are
					// gone; containerd leaves its process running after any
					// client that goes (observed on 2.4: cat outlives its
					// stream), so there the descriptors above are the proof.
					waitFor(t, 10*time.Second, func() bool { return !processRunning(marker) })
				}
			})
		}
	}
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = goleak.Find(before, goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop")); err == nil {
			return
		}
	}
	t.Fatalf("goroutines left after the malformed sessions:\n%v", err)
}

// wsDial opens a raw WebSocket to path offering protocol, so a test can
// write bytes no real client would.
func (n *node) wsDial(t *testing.T, path, protocol string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{TLSClientConfig: n.tlsConfig(n.certs.ClientCert, n.certs.ClientKey),
		Subprotocols: []string{protocol}, HandshakeTimeout: 10 * time.Second}
	c, resp, err := d.Dial(strings.Replace(n.run.URL, "https://", "wss://", 1)+path, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", path, err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closeCode reads until the node's close frame and returns its code.
func closeCode(t *testing.T, c *websocket.Conn) int {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			t.Fatalf("session ended without a close frame: %v", err)
		}
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestRawClientFramingErrors: the same framing errors from rawclient, the
// conformance client that shares no code with client-go or gorilla (its
// own handshake, bytes written as given): each gets close 1002, and the
// node ends every session.
func TestRawClientFramingErrors(t *testing.T) {
	n := startNode(t)
	bin := filepath.Join(t.TempDir(), "rawclient")
	if out, err := exec.Command("go", "build", "-o", bin, "./rawclient").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	url := n.run.URL + "/exec/default/demo/app?command=cat&input=1&output=1&error=1"
	for _, fe := range framingErrors {
		t.Run(fe.name, func(t *testing.T) {
			out, err := exec.Command(bin, "-url", url, "-cert", n.certs.ClientCert, "-key", n.certs.ClientKey,
				"-ca", n.certs.CA, "-send", hex.EncodeToString(fe.bytes)).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "101 Switching Protocols") || !strings.HasSuffix(string(out), "close 1002\n") {
				t.Fatalf("rawclient: %v\n%s", err, out)
			}
		})
	}
	n.waitIdle(10 * time.Second)
}

// TestFirstFrameWithHandshake: a client may write its first frames in the
// same write as its handshake; they are read, not lost in a buffer behind
// the upgrade.
func TestFirstFrameWithHandshake(t *testing.T) {
	n := startNode(t)
	conn, err := tls.Dial("tcp", n.run.Addr, n.tlsConfig(n.certs.ClientCert, n.certs.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	req := "GET /exec/default/demo/app?command=cat&input=1&output=1&error=1 HTTP/1.1\r\nHost: node\r\n" +
		"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n"
	first := append(maskedFrame(0x82, []byte{0, 'h', 'i'}), maskedFrame(0x82, []byte{255, 0})...)
	if _, err := conn.Write(append([]byte(req), first...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	var out []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatalf("read %q then %v: the first frames were lost", out, err)
		}
		payload := make([]byte, h[1]&0x7f)
		if _, err := io.ReadFull(br, payload); err != nil {
			t.Fatal(err)
		}
		if h[0]&0x0f == 8 {
			break
		}
		if len(payload) > 1 && payload[0] == 1 {
			out = append(out, payload[1:]...)
		}
	}
	if string(out) != "hi" {
		t.Fatalf("stdout %q, want the stdin sent with the handshake", out)
	}
	n.waitIdle(10 * time.Second)
}
