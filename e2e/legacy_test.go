// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// legacyDial opens a WebSocket with only legacy subprotocols, which
// kubestream must pass to the runtime unchanged.
func (n *node) legacyDial(t *testing.T, path string, protocols ...string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{TLSClientConfig: n.tlsConfig(n.certs.ClientCert, n.certs.ClientKey),
		Subprotocols: protocols, HandshakeTimeout: 10 * time.Second}
	c, resp, err := d.Dial(strings.Replace(n.run.URL, "https://", "wss://", 1)+path, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", path, err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLegacyWebSocketPassThrough covers the table's legacy rows with raw
// clients (client-go no longer speaks them): the runtime answers, kubestream
// only relays.
func TestLegacyWebSocketPassThrough(t *testing.T) {
	n := startNode(t)

	t.Run("port-forward v4.channel.k8s.io with ?port", func(t *testing.T) {
		port := tcpEcho(t)
		c := n.legacyDial(t, fmt.Sprintf("/portForward/default/demo?port=%d", port), "v4.channel.k8s.io")
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		// Channels 0 (data) and 1 (error) each open with the port, 2 bytes LE.
		for i := 0; i < 2; i++ {
			_, m, err := c.ReadMessage()
			if err != nil || len(m) != 3 || binary.LittleEndian.Uint16(m[1:]) != uint16(port) {
				t.Fatalf("port announcement %d: %v %v", i, m, err)
			}
		}
		if err := c.WriteMessage(websocket.BinaryMessage, append([]byte{0}, "legacy forward"...)); err != nil {
			t.Fatal(err)
		}
		var got []byte
		for len(got) < len("legacy forward") {
			_, m, err := c.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			if len(m) > 0 && m[0] == 0 {
				got = append(got, m[1:]...)
			}
		}
		if string(got) != "legacy forward" {
			t.Fatalf("echo %q", got)
		}
	})

	t.Run("exec base64.channel.k8s.io", func(t *testing.T) {
		c := n.legacyDial(t, "/exec/default/demo/app?command=echo&command=b64+works&output=1", "base64.channel.k8s.io")
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		var out string
		for {
			mt, m, err := c.ReadMessage()
			if err != nil {
				break // the runtime closes after the command
			}
			if mt != websocket.TextMessage || len(m) == 0 {
				t.Fatalf("want text frames with an ASCII channel digit, got type %d %q", mt, m)
			}
			if m[0] == '1' {
				b, err := base64.StdEncoding.DecodeString(string(m[1:]))
				if err != nil {
					t.Fatal(err)
				}
				out += string(b)
			}
		}
		if out != "b64 works\n" {
			t.Fatalf("stdout %q", out)
		}
	})
	if n.requests("portforward", "proxied-websocket") != 1 || n.requests("exec", "proxied-websocket") != 1 {
		t.Errorf("routes: %v %v", n.requests("portforward", "proxied-websocket"), n.requests("exec", "proxied-websocket"))
	}
	n.waitIdle(10 * time.Second)
}
