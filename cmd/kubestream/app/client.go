// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/klog/v2"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// ClientOptions address a kubelet API the way kubectl's apiserver would.
type ClientOptions struct {
	Server               string
	CertFile, KeyFile    string
	CAFile               string
	InsecureSkipVerify   bool
	Namespace, Container string
	UID                  string
	Protocol             string // auto, websocket or spdy
	Stdin, TTY           bool
}

// AddFlags registers the client flags.
func (o *ClientOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Server, "server", "https://127.0.0.1:10250", "The kubelet API URL.")
	fs.StringVar(&o.CertFile, "client-certificate", "", "Client certificate file.")
	fs.StringVar(&o.KeyFile, "client-key", "", "Client key file.")
	fs.StringVar(&o.CAFile, "certificate-authority", "", "CA file for the server's certificate.")
	fs.BoolVar(&o.InsecureSkipVerify, "insecure-skip-tls-verify", false, "Do not verify the server's certificate.")
	fs.StringVarP(&o.Namespace, "namespace", "n", "default", "The pod's namespace.")
	fs.StringVarP(&o.Container, "container", "c", "", "The container (exec and attach).")
	fs.StringVar(&o.UID, "pod-uid", "", "The pod's UID (optional; must match).")
	fs.StringVar(&o.Protocol, "protocol", "auto", "auto (WebSocket, then SPDY on upgrade failure, like kubectl), websocket or spdy.")
	fs.BoolVarP(&o.Stdin, "stdin", "i", false, "Pass stdin to the container.")
	fs.BoolVarP(&o.TTY, "tty", "t", false, "Stdin is a TTY.")
}

func (o *ClientOptions) restConfig() *rest.Config {
	return &rest.Config{
		Host: o.Server,
		TLSClientConfig: rest.TLSClientConfig{
			CertFile: o.CertFile, KeyFile: o.KeyFile, CAFile: o.CAFile, Insecure: o.InsecureSkipVerify,
		},
	}
}

func (o *ClientOptions) podPath(sub, pod string) string {
	p := "/" + sub + "/" + url.PathEscape(o.Namespace) + "/" + url.PathEscape(pod)
	if o.UID != "" {
		p += "/" + url.PathEscape(o.UID)
	}
	if sub != "portForward" {
		p += "/" + url.PathEscape(o.Container)
	}
	return p
}

// NewExecutor returns client-go's executor for protocol: the WebSocket (v5)
// one, the SPDY one, or kubectl's fallback pair. used reports which
// protocol carried the session.
func NewExecutor(cfg *rest.Config, protocol, rawURL string, used *string) (remotecommand.Executor, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	spdyExec := func() (remotecommand.Executor, error) { return remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u) }
	switch protocol {
	case "spdy":
		*used = "spdy"
		return spdyExec()
	case "websocket":
		*used = "websocket"
		return remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, rawURL)
	case "auto", "":
	default:
		return nil, fmt.Errorf("unknown protocol %q: want auto, websocket or spdy", protocol)
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, rawURL)
	if err != nil {
		return nil, err
	}
	sp, err := spdyExec()
	if err != nil {
		return nil, err
	}
	*used = "websocket"
	return remotecommand.NewFallbackExecutor(ws, sp, fallbackLogged("WebSocket upgrade failed", func() { *used = "spdy" }))
}

// RunRemoteCommand runs exec (with command) or attach against pod.
func (o *ClientOptions) RunRemoteCommand(ctx context.Context, sub, pod string, command []string, stdin io.Reader, stdout, stderr io.Writer) error {
	q := url.Values{}
	for _, c := range command {
		q.Add("command", c)
	}
	if o.Stdin {
		q.Set("input", "1")
	}
	q.Set("output", "1")
	if o.TTY {
		q.Set("tty", "1")
	} else {
		q.Set("error", "1")
	}
	raw := strings.TrimSuffix(o.Server, "/") + o.podPath(sub, pod) + "?" + q.Encode()
	var used string
	exec, err := NewExecutor(o.restConfig(), o.Protocol, raw, &used)
	if err != nil {
		return err
	}
	opts := remotecommand.StreamOptions{Stdout: stdout, Tty: o.TTY}
	if o.Stdin {
		opts.Stdin = stdin
	}
	if !o.TTY {
		opts.Stderr = stderr
	}
	err = exec.StreamWithContext(ctx, opts)
	klog.V(1).InfoS("Session ended", "protocol", used, "err", err)
	return err
}

// PortForward forwards ports ("local:remote" or "port") to pod until ctx
// ends, using client-go's SPDY-over-WebSocket tunnel first (auto) or only.
func (o *ClientOptions) PortForward(ctx context.Context, pod string, ports []string, ready chan struct{}, out io.Writer) error {
	cfg := o.restConfig()
	u, err := url.Parse(strings.TrimSuffix(o.Server, "/") + o.podPath("portForward", pod))
	if err != nil {
		return err
	}
	dialer, err := NewPortForwardDialer(cfg, o.Protocol, u)
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	go func() {
		<-ctx.Done()
		close(stop)
	}()
	fw, err := portforward.New(dialer, ports, stop, ready, out, os.Stderr)
	if err != nil {
		return err
	}
	klog.V(1).InfoS("Port-forwarding", "pod", pod, "ports", ports, "protocol", o.Protocol)
	return fw.ForwardPorts()
}

// NewPortForwardDialer returns client-go's tunneling dialer, SPDY dialer, or
// kubectl's fallback of the first to the second.
func NewPortForwardDialer(cfg *rest.Config, protocol string, u *url.URL) (httpstream.Dialer, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	if protocol == "spdy" {
		return spdyDialer, nil
	}
	tunnel, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		return nil, err
	}
	if protocol == "websocket" {
		return tunnel, nil
	}
	return portforward.NewFallbackDialer(tunnel, spdyDialer, fallbackLogged("WebSocket tunnel refused", nil)), nil
}

// fallbackLogged is ShouldFallback that says so at -v=1 and runs onFallback.
func fallbackLogged(what string, onFallback func()) func(error) bool {
	return func(err error) bool {
		if !ShouldFallback(err) {
			return false
		}
		klog.V(1).InfoS(what+", falling back to SPDY", "err", err)
		if onFallback != nil {
			onFallback()
		}
		return true
	}
}

// ShouldFallback is kubectl's test for retrying over SPDY. client-go 0.37
// raises the upgrade failure from k8s.io/streaming for WebSocket executors
// and from apimachinery elsewhere, so both types count.
func ShouldFallback(err error) bool {
	return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err) ||
		streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
}
