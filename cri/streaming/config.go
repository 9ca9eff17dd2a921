// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"crypto/tls"
	"net/url"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/remotecommand"
	upstream "k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/kubestream/kubestream/internal/wire"
)

// The protocols this package serves itself; every other one goes to
// cri-streaming's handlers.
const (
	ProtocolV5     = remotecommand.StreamProtocolV5Name               // v5.channel.k8s.io
	ProtocolTunnel = portforward.WebsocketsSPDYTunnelingPortForwardV1 // SPDY/3.1+portforward.k8s.io
)

// Runtime is cri-streaming's: what a container runtime implements is
// unchanged.
type Runtime = upstream.Runtime

// TerminalSize is cri-streaming's resize event.
type TerminalSize = remotecommandserver.TerminalSize

// Server is cri-streaming's Server: an http.Handler for the streaming URLs,
// the three CRI calls that issue them, and Start/Stop.
type Server = upstream.Server

// Config is cri-streaming's Config with the v5 protocol and the
// port-forward tunnel among the supported ones, and the limits of the
// sessions served natively.
type Config struct {
	// Addr is the address to serve on (Start).
	Addr string
	// BaseURL is the base of the URLs returned; default http(s)://Addr.
	BaseURL *url.URL
	// StreamIdleTimeout ends a session without data for this long.
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout bounds the wait for a port-forward's stream
	// pair, and cri-streaming's wait for SPDY streams.
	StreamCreationTimeout time.Duration
	// SupportedRemoteCommandProtocols lists the exec and attach protocols:
	// ProtocolV5 is served natively, the rest by cri-streaming.
	SupportedRemoteCommandProtocols []string
	// SupportedPortForwardProtocols lists the port-forward protocols:
	// ProtocolTunnel is served natively, the rest by cri-streaming.
	SupportedPortForwardProtocols []string
	// TLSConfig makes Start serve TLS.
	TLSConfig *tls.Config

	// Limits of natively served sessions; zero fields take DefaultLimits'.
	Limits Limits
	// BufferSize bounds one output message (default 32 KiB).
	BufferSize int
	// Metrics, if set, counts requests by protocol (see NewMetrics).
	Metrics *Metrics
}

// DefaultConfig is cri-streaming's defaults with v5 and the tunnel added.
func DefaultConfig() Config {
	return Config{
		StreamIdleTimeout:               4 * time.Hour,
		StreamCreationTimeout:           remotecommandserver.DefaultStreamCreationTimeout,
		SupportedRemoteCommandProtocols: append([]string{ProtocolV5}, remotecommandserver.SupportedStreamingProtocols...),
		SupportedPortForwardProtocols:   append([]string{ProtocolTunnel}, portforward.SupportedProtocols...),
	}
}

// FromCRIStreaming converts a runtime's cri-streaming Config (containerd
// builds one from its own configuration): the same fields, with v5 and the
// tunnel put first in protocol lists that hold cri-streaming's defaults, so
// a runtime that adopts the package keeps its configuration and gains both.
func FromCRIStreaming(c upstream.Config) Config {
	rc, pf := c.SupportedRemoteCommandProtocols, c.SupportedPortForwardProtocols
	if len(rc) == 0 || slices.Equal(rc, remotecommandserver.SupportedStreamingProtocols) {
		rc = DefaultConfig().SupportedRemoteCommandProtocols
	}
	if len(pf) == 0 || slices.Equal(pf, portforward.SupportedProtocols) {
		pf = DefaultConfig().SupportedPortForwardProtocols
	}
	return Config{
		Addr:                            c.Addr,
		BaseURL:                         c.BaseURL,
		StreamIdleTimeout:               c.StreamIdleTimeout,
		StreamCreationTimeout:           c.StreamCreationTimeout,
		SupportedRemoteCommandProtocols: slices.Clone(rc),
		SupportedPortForwardProtocols:   slices.Clone(pf),
		TLSConfig:                       c.TLSConfig,
	}
}

// Limits bound the sessions served natively (v5 and the tunnel); the idle
// timeout is Config.StreamIdleTimeout. A zero field takes DefaultLimits'.
type Limits struct {
	// PingPeriod is how often the client is pinged; PongTimeout how long
	// after a ping period without any frame from it the client is taken
	// as gone.
	PingPeriod, PongTimeout time.Duration
	// WriteTimeout bounds one write to the client; CloseGrace the wait
	// for its close reply.
	WriteTimeout, CloseGrace time.Duration
	// MaxMessageSize is the largest message accepted; a larger one ends
	// the session with close code 1009.
	MaxMessageSize int
}

// DefaultLimits are the kubelet's.
func DefaultLimits() Limits {
	d := wire.DefaultLimits
	return Limits{PingPeriod: d.PingPeriod, PongTimeout: d.PongTimeout, WriteTimeout: d.WriteTimeout,
		CloseGrace: d.CloseGrace, MaxMessageSize: d.MaxMessageSize}
}

// wire is l as internal/wire enforces it, defaults filled.
func (l Limits) wire(idle time.Duration) wire.Limits {
	w := wire.Limits{IdleTimeout: idle, PingPeriod: l.PingPeriod, PongTimeout: l.PongTimeout,
		WriteTimeout: l.WriteTimeout, CloseGrace: l.CloseGrace, MaxMessageSize: l.MaxMessageSize}.WithDefaults()
	w.IdleTimeout = idle
	return w
}
