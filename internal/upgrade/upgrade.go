// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package upgrade is where kubestream dials a container runtime's streaming
// server: the SPDY/3.1 upgrade (SPDY), the client's own WebSocket handshake
// (WebSocket), and the HTTP/1.1 upgrade under both (Dial), each returning
// the raw connection after the runtime's 101. Written by hand rather than through net/http's client or
// k8s.io/streaming's round trippers because both the translator and the
// direct WebSocket path need the raw bytes behind the 101, and the caller
// must see a refusal (status and body) before deciding what to do with it.
//
// Reading order: upgrade.go, the package's one file.
package upgrade

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Error is a runtime's refusal of an upgrade: its status and body.
type Error struct {
	StatusCode int
	Body       string
}

func (e *Error) Error() string {
	return fmt.Sprintf("container runtime refused the upgrade: %d %s: %s",
		e.StatusCode, http.StatusText(e.StatusCode), strings.TrimSpace(e.Body))
}

// Dial sends method u with header (which names the upgrade) and returns the
// connection and the runtime's 101 response. Any other status is an *Error.
// ctx bounds the dial and the handshake, not the connection's later life.
func Dial(ctx context.Context, u *url.URL, tlsConfig *tls.Config, method string, header http.Header) (net.Conn, *http.Response, error) {
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host = net.JoinHostPort(u.Hostname(), "443")
		} else {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, nil, fmt.Errorf("dialing container runtime streaming server %s: %w", host, err)
	}
	if u.Scheme == "https" {
		cfg := tlsConfig.Clone()
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, nil, fmt.Errorf("TLS handshake with container runtime %s: %w", host, err)
		}
		conn = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// Unblock the handshake if the caller gives up.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req := &http.Request{
		Method:     method,
		URL:        u,
		Host:       u.Host,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     header,
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("writing upgrade request to container runtime: %w", err)
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("reading upgrade response from container runtime: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		conn.Close()
		return nil, nil, &Error{StatusCode: resp.StatusCode, Body: string(body)}
	}
	if ctx.Err() != nil {
		conn.Close()
		return nil, nil, ctx.Err()
	}
	_ = conn.SetDeadline(time.Time{})
	// The runtime may already have sent frames behind the 101.
	return Unread(conn, br), resp, nil
}

// Unread returns conn with the bytes r has buffered put back in front (a
// copy: read first, and then conn itself, with no reader between): the one
// way a connection taken from an HTTP reader (a hijacked client's, a
// runtime's after its 101) keeps what that reader had already read off it,
// such as a first frame sent with the handshake.
func Unread(conn net.Conn, r *bufio.Reader) net.Conn {
	if r == nil || r.Buffered() == 0 {
		return conn
	}
	early, _ := r.Peek(r.Buffered())
	return &unreadConn{Conn: conn, early: bytes.Clone(early)}
}

type unreadConn struct {
	net.Conn
	early []byte
}

// An unreadConn half-closes as the connection it wraps does (CloseWrite).
var _ interface{ CloseWrite() error } = (*unreadConn)(nil)

func (c *unreadConn) Read(p []byte) (int, error) {
	if len(c.early) > 0 {
		n := copy(p, c.early)
		c.early = c.early[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the underlying connection where it can.
func (c *unreadConn) CloseWrite() error { return CloseWrite(c.Conn) }

// CloseWrite half-closes conn (TCP FIN, or TLS close_notify) so the peer
// reads EOF while its own data can still arrive; it closes conn outright
// when neither is possible.
func CloseWrite(conn net.Conn) error {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return conn.Close()
}

// SPDY dials a runtime streaming URL and performs the SPDY/3.1 upgrade
// offering protocols (X-Stream-Protocol-Version, in preference order). It
// returns the raw connection after the 101 and the protocol the runtime
// chose: the translator and the relays need the bytes, not a parsed
// spdystream connection.
func SPDY(ctx context.Context, u *url.URL, tlsConfig *tls.Config, protocols []string) (net.Conn, string, error) {
	h := http.Header{}
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", "SPDY/3.1")
	for _, p := range protocols {
		h.Add("X-Stream-Protocol-Version", p)
	}
	conn, resp, err := Dial(ctx, u, tlsConfig, http.MethodPost, h)
	if err != nil {
		return nil, "", err
	}
	return conn, resp.Header.Get("X-Stream-Protocol-Version"), nil
}

// ErrUnusableHandshake is a runtime's 101 to a WebSocket offer that the
// client would reject: another protocol, or an accept key not made from
// the client's key.
var ErrUnusableHandshake = errors.New("container runtime answered the WebSocket with an unusable handshake")

// WebSocket offers a runtime streaming URL a client's WebSocket handshake
// as it is — the client's own key and one protocol — so that the runtime's
// 101 can be relayed to the client unchanged and the two connections
// spliced. A 101 the client would reject is ErrUnusableHandshake.
func WebSocket(ctx context.Context, u *url.URL, tlsConfig *tls.Config, key, protocol string) (net.Conn, error) {
	conn, got, err := WebSocketOffer(ctx, u, tlsConfig, key, []string{protocol})
	if err == nil && got != protocol {
		conn.Close()
		return nil, fmt.Errorf("%w (protocol %q)", ErrUnusableHandshake, got)
	}
	return conn, err
}

// WebSocketOffer offers the client's key and protocols (none: the legacy
// unnamed channel protocol) and returns the connection and the protocol the
// runtime chose, which must be one offered.
func WebSocketOffer(ctx context.Context, u *url.URL, tlsConfig *tls.Config, key string, protocols []string) (net.Conn, string, error) {
	h := http.Header{}
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", "websocket")
	h.Set("Sec-WebSocket-Version", "13")
	h.Set("Sec-WebSocket-Key", key)
	if len(protocols) > 0 {
		h.Set("Sec-WebSocket-Protocol", strings.Join(protocols, ", "))
	}
	conn, resp, err := Dial(ctx, u, tlsConfig, http.MethodGet, h)
	if err != nil {
		return nil, "", err
	}
	got := resp.Header.Get("Sec-WebSocket-Protocol")
	offered := got == "" || slices.Contains(protocols, got)
	if !offered || resp.Header.Get("Sec-WebSocket-Accept") != AcceptKey(key) {
		conn.Close()
		return nil, "", fmt.Errorf("%w (protocol %q)", ErrUnusableHandshake, got)
	}
	return conn, got, nil
}

// websocketGUID is RFC 6455's key suffix for Sec-WebSocket-Accept.
const websocketGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// AcceptKey is the Sec-WebSocket-Accept for a client's key (RFC 6455
// §4.2.2). Written out because gorilla keeps its own unexported.
func AcceptKey(key string) string {
	h := sha1.Sum([]byte(key + websocketGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// SwitchProtocols writes the node's own 101 Switching Protocols, with h's
// fields as they are keyed (a nil value leaves a field out), to w and
// flushes it: the one writer of the 101 for every route that carries a
// hijacked connection itself (gorilla's Upgrader writes the translated
// routes').
func SwitchProtocols(w *bufio.Writer, h http.Header) error {
	_, _ = w.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	_ = h.Write(w) // a bufio.Writer keeps its first error for Flush
	_, _ = w.WriteString("\r\n")
	return w.Flush()
}

// WebSocketAnswer is the 101's fields for a WebSocket handshake with the
// client's key, agreeing to protocol ("" agrees to none).
func WebSocketAnswer(key, protocol string) http.Header {
	h := http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}, "Sec-WebSocket-Accept": {AcceptKey(key)}}
	if protocol != "" {
		h["Sec-WebSocket-Protocol"] = []string{protocol}
	}
	return h
}
