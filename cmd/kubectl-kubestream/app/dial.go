// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is kubectl-kubestream's port-forward: the mappings it
// parses, the WebSocket it dials (with the kubeconfig's TLS and
// credentials) and the client end of the session it runs (portmux). The
// plugin's main and the e2e suite call it alike.
//
// Reading order: forward.go (Options, their mappings, Run), then dial.go
// (Dial, and a node's refusal told apart from a node without the mode).
// Nothing runs back up.
package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/kubestream/kubestream/portmux"
)

// acceptedHeader is where a kubestream node lists what it accepts in a
// 403; a stock kubelet's 403 has no such header.
const acceptedHeader = "X-Accepted-Stream-Protocol-Versions"

// NotServedError: the node answered without serving the mode (a kubelet
// without kubestream, or a kubestream from before the mode).
type NotServedError struct {
	Protocol string
	Status   string
}

func (e *NotServedError) Error() string {
	return fmt.Sprintf("the node does not serve %s (%s)", e.Protocol, e.Status)
}

// Dial opens the session's WebSocket to u offering protocol, with cfg's
// TLS, credentials and proxy, as client-go's WebSocket transport does but
// keeping the refusal's headers, which tell kubestream from a stock kubelet.
func Dial(ctx context.Context, cfg *rest.Config, u *url.URL, protocol string) (*websocket.Conn, error) {
	if cfg.UserAgent == "" { // so the apiserver's audit and the node's name the plugin
		cfg = rest.CopyConfig(cfg)
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, err
	}
	tlsConfig, err := transport.TLSConfigFor(tc)
	if err != nil {
		return nil, err
	}
	d := &dialer{tls: tlsConfig, protocol: protocol, proxy: cfg.Proxy}
	rt, err := transport.HTTPWrappersForConfig(tc, d)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	// The apiserver keeps a client's Audit-Id as its own and passes it to
	// the node, whose record carries it: the two join on it.
	req.Header.Set("Audit-Id", string(uuid.NewUUID()))
	if _, err := rt.RoundTrip(req); err != nil {
		return nil, err
	}
	return d.conn, nil
}

// dialer is the innermost round tripper: the WebSocket handshake itself,
// after client-go's wrappers added credentials and the user agent.
type dialer struct {
	tls      *tls.Config
	protocol string
	proxy    func(*http.Request) (*url.URL, error)
	conn     *websocket.Conn
}

func (d *dialer) RoundTrip(req *http.Request) (*http.Response, error) {
	u := *req.URL
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	case "http":
		u.Scheme = "ws"
	}
	proxy := d.proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	// Buffers of a whole frame: with gorilla's 4 KiB default a 32 KiB data
	// frame leaves as eight fragments, eight headers and writes for the
	// node to parse, and is read in eight.
	wd := websocket.Dialer{TLSClientConfig: d.tls, Subprotocols: []string{d.protocol}, Proxy: proxy, HandshakeTimeout: 30 * time.Second,
		ReadBufferSize: portmux.MaxFrame, WriteBufferSize: portmux.MaxFrame}
	conn, resp, err := wd.DialContext(req.Context(), u.String(), req.Header)
	if err != nil {
		if resp == nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)) // the reason, when there is one
		return nil, refusal(resp, strings.TrimSpace(string(body)), d.protocol)
	}
	if conn.Subprotocol() != d.protocol {
		_ = conn.Close() // done with it: a failed close changes nothing
		return nil, &NotServedError{Protocol: d.protocol, Status: fmt.Sprintf("101 with subprotocol %q", conn.Subprotocol())}
	}
	d.conn = conn
	return resp, nil
}

// refusal reads a non-101 answer. The apiserver's own refusals (RBAC
// among them: a 403 too) are a Status, whose message is the error, as
// kubectl prints it; a 403 the node sent that does not list protocol is a
// node that does not serve the mode; anything else is an error as said.
func refusal(resp *http.Response, body, protocol string) error {
	var status metav1.Status
	if json.Unmarshal([]byte(body), &status) == nil && status.Kind == "Status" && status.Message != "" {
		return errors.New(status.Message)
	}
	var accepted []string
	for _, v := range resp.Header.Values(acceptedHeader) {
		for _, p := range strings.Split(v, ",") {
			accepted = append(accepted, strings.TrimSpace(p))
		}
	}
	if resp.StatusCode == http.StatusForbidden && !slices.Contains(accepted, protocol) {
		return &NotServedError{Protocol: protocol, Status: resp.Status}
	}
	if body == "" {
		body = resp.Status
	}
	return errors.New(body)
}
