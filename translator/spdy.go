package translator

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/streaming/pkg/httpstream"
)

// UpgradeError is a runtime's refusal of an upgrade: its status and body.
type UpgradeError struct {
	StatusCode int
	Body       string
}

func (e *UpgradeError) Error() string {
	return fmt.Sprintf("container runtime refused the upgrade: %d %s: %s",
		e.StatusCode, http.StatusText(e.StatusCode), strings.TrimSpace(e.Body))
}

// DialFunc opens a new upgraded connection to the runtime offering protocols
// and returns it with the protocol the runtime chose. CRI streaming URLs are
// single-use, so each call must come with a fresh URL.
type DialFunc func(ctx context.Context, protocols []string) (net.Conn, string, error)

// UpgradeSPDY dials a runtime streaming URL and performs the SPDY/3.1
// upgrade, returning the raw connection after the 101. Written by hand
// rather than through k8s.io/streaming's SpdyRoundTripper because the tunnel
// needs the raw bytes, not a parsed spdystream connection, and one dialer
// for both keeps the behaviour identical.
func UpgradeSPDY(ctx context.Context, u *url.URL, tlsConfig *tls.Config, protocols []string) (net.Conn, string, error) {
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
		return nil, "", fmt.Errorf("dialing container runtime streaming server %s: %w", host, err)
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
			return nil, "", fmt.Errorf("TLS handshake with container runtime %s: %w", host, err)
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
		Method:     http.MethodPost,
		URL:        u,
		Host:       u.Host,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     http.Header{},
	}
	req.Header.Set(httpstream.HeaderConnection, httpstream.HeaderUpgrade)
	req.Header.Set(httpstream.HeaderUpgrade, "SPDY/3.1")
	for _, p := range protocols {
		req.Header.Add(httpstream.HeaderProtocolVersion, p)
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, "", fmt.Errorf("writing upgrade request to container runtime: %w", err)
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, "", fmt.Errorf("reading upgrade response from container runtime: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		conn.Close()
		return nil, "", &UpgradeError{StatusCode: resp.StatusCode, Body: string(body)}
	}
	if ctx.Err() != nil {
		conn.Close()
		return nil, "", ctx.Err()
	}
	_ = conn.SetDeadline(time.Time{})
	proto := resp.Header.Get(httpstream.HeaderProtocolVersion)
	if n := br.Buffered(); n > 0 {
		// The runtime may already have sent frames behind the 101.
		return &bufferedConn{Conn: conn, r: br}, proto, nil
	}
	return conn, proto, nil
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
