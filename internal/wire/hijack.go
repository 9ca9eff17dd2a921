// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bufio"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/internal/upgrade"
)

// Hijacker hands gorilla's Upgrader the connection with what the HTTP
// server had already buffered (a client may write its first frames in the
// same write as its handshake) put back in front of it, and the server's
// reader emptied onto that: kubestream's own frame reader reads the
// connection gorilla returns (NetConn), so nothing may stay behind in a
// buffer it never sees. gorilla still reuses the server's reader, so a
// session costs no new buffer.
type Hijacker struct{ http.ResponseWriter }

var _ http.Hijacker = Hijacker{}

func (b Hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(b.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	c := upgrade.Unread(conn, brw.Reader)
	if c != conn {
		brw.Reader.Reset(c)
	}
	return c, brw, nil
}

// NewUpgrader is the server side's WebSocket handshake for one protocol,
// for the node and the runtime side alike: the handshake within timeout,
// and a refusal answered with status and reason. It sets no buffers:
// gorilla does the handshake alone (Conn reads and writes the connection
// after it), and with none set it writes its response through the HTTP
// server's hijacked writer, so the handshake costs no buffer of its own.
// Origins are not checked: the callers are an apiserver relaying its
// client's handshake and a kubelet (or crictl) dialling the URL it was just
// issued, authenticated, not browsers.
func NewUpgrader(protocol string, timeout time.Duration) *websocket.Upgrader {
	return &websocket.Upgrader{
		HandshakeTimeout: timeout,
		Subprotocols:     []string{protocol},
		CheckOrigin:      func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
			http.Error(w, "WebSocket handshake failed: "+reason.Error(), status)
		},
	}
}
