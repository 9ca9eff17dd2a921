// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package streaming is a container runtime's streaming server that speaks
// the WebSocket protocols itself: v5.channel.k8s.io for exec and attach, and
// the SPDY/3.1+portforward.k8s.io tunnel for port-forward. Its API is
// k8s.io/cri-streaming/pkg/streaming's (the same Runtime, Server, Config
// fields and NewServer), so a runtime adopts it by swapping one import:
//
//	import "github.com/kubestream/kubestream/cri/streaming"
//
//	srv, err := streaming.NewServer(config, runtime)
//
// With it, a node whose kubelet serves WebSockets (kubestream) carries a
// session from kubectl to the runtime with no SPDY on any leg.
//
// Every other protocol (SPDY remotecommand v1-v4, SPDY portforward.k8s.io,
// the legacy WebSocket channel protocols) is served by cri-streaming's own
// exported handlers behind the same single-use URLs (a minute, at most 1000
// waiting, unknown or spent → 404), so a runtime that adopts the package
// loses nothing and older kubelets keep working. Leave ProtocolV5 or
// ProtocolTunnel out of the Config's lists to serve only cri-streaming's.
//
// Reading order, each file before the files it uses: server.go (NewServer,
// the CRI calls that issue the URLs, Start and Stop), route.go (the
// server's state; an issued URL to its session: 404, v5 or the tunnel
// served here, or cri-streaming's handler), v5.go (a v5 session: the
// runtime's call, the end of the session), v5input.go (the client's stdin
// and resizes to the process) and v5output.go (the process's output as
// messages), portforward.go (a tunnel session: its start and its end),
// tunnel.go (the tunnel's reader: SPDY frames, streams opened and reset),
// forward.go (a forwarded connection: pairing its streams, the runtime's
// call), stream.go (one SPDY stream: its inbox and its writes), adapter.go
// (cri-streaming's sessions: the runtime behind its handlers), backend.go
// (what every session takes from its server: the runtime, the
// configuration, the server's stop and its count of runtime calls), then
// config.go (Config, and the types this package shares with cri-streaming),
// metrics.go and tokens.go (the single-use URLs).
//
// Nothing runs back up the order: what the sessions share (backend.go,
// config.go) comes after them.
//
// # Goroutines
//
// A v5 session runs on the HTTP handler's goroutine, which reads the
// client (stdin into the process's stdin pipe, resize into the resize
// channel, the close signal as EOF), and one goroutine running the
// runtime's Exec or Attach; output is written by whichever runtime goroutine
// writes it, serialised by the connection. The status goes after the
// runtime's call returned, then a close frame and a bounded wait for the
// client's. A client gone first cancels the call's context.
//
// A tunnel runs on the handler's goroutine, the client's only reader: it
// reads the SPDY frames the WebSocket messages carry (kubestream's own
// framing, internal/spdy: no spdystream, no compressor), opens and pairs
// data and error streams, and copies data into each stream's inbox (64 KiB;
// full, it waits, and a runtime that reads nothing for half the liveness
// window has that stream reset rather than holding the session). One
// goroutine per forwarded connection runs the runtime's PortForward, which
// reads its inbox and writes data frames through the connection.
//
// # Dependencies
//
// gorilla/websocket (the handshake) and kubestream's internal/wire and
// internal/spdy (the WebSocket and SPDY framing shared with kubestream's
// translator, not the translator itself) and internal/connreset (a pod's
// reset of one forwarded connection told from other failures),
// k8s.io/cri-streaming and what it brings
// for the protocols it serves, k8s.io/cri-api, grpc status codes, and
// prometheus/client_golang for the request counter.
package streaming
