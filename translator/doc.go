// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package translator carries Kubernetes streaming sessions between a
// client's connection and a container runtime's streaming server, once both
// are upgraded: v5 remotecommand (exec, attach) translated into SPDY/3.1
// streams (ServeRemoteCommand), port-forward's SPDY carried inside
// WebSocket messages (ServeTunnel), a WebSocket spliced to a runtime that
// speaks it (Splice), and SPDY relayed frame by frame (RelaySPDY). It knows
// nothing of HTTP routing or CRI: its callers hand it upgraded connections
// and a way to dial the runtime.
//
// Reading order, each file before the files it uses, one session kind at
// a time: tunnel.go (ServeTunnel) and framebatch.go (one direction's SPDY
// frames gathered into one write), splice.go (Splice) with splicedown.go
// (the runtime's bytes to the client, the session's end) and spliceup.go
// (the client's bytes to the runtime), spdyrelay.go (RelaySPDY) with
// spdyrelayup.go (the client's frames, its PINGs answered here) and
// spdyrelaydown.go (the runtime's frames, an error stream closed for the
// client when the runtime's side is cut), remotecommand.go
// (ServeRemoteCommand, the channel numbers) with rcinput.go (the client's
// stdin and resizes to the runtime) and rcoutput.go (the runtime's output
// and status to the client), observer.go (Observer, the client's frames
// followed for it) and follow.go (the runtime's frames followed: a close,
// the data, the last status), then what they share: spdyconn.go (the
// runtime's SPDY connection, for remotecommand), clientwriter.go (the
// client's writes, the node's control frames between them), config.go
// (Config), pfreset.go (a pod's reset of one forwarded connection kept
// from ending the forward) and status.go (exit codes, stop messages, the
// runtime's status).
//
// What runs back up the order: a session's up and down halves
// (splicedown.go, spdyrelayup.go, spdyrelaydown.go, rcinput.go,
// rcoutput.go) hang methods on the type their session's file defines and
// share its state (one type's methods spread over files by direction, so
// each file stays small); spdyrelaydown.go shows the observer through
// spdyrelayup.go's show, the one place both directions' payloads reach
// it; observer.go, follow.go and spdyrelayup.go read the channel numbers
// remotecommand.go exports with ServeRemoteCommand; and follow.go feeds
// observer.go's Observer while observer.go's follower embeds follow.go's
// messageFollower, the one frame follower of both directions.
//
// # Goroutines
//
// Each session runs on two goroutines, and every byte has one owner:
//
//   - The caller's goroutine (the HTTP handler) owns the client's read
//     side: the hand-written WebSocket reader (internal/wire, read.go) in ServeTunnel
//     and ServeRemoteCommand's readLoop, which also writes what it reads to
//     the runtime; the client-to-runtime copy in Splice (spliceUp runs on a
//     goroutine of its own there) and RelaySPDY's up copier (likewise).
//   - One goroutine per session owns the runtime's read side and writes
//     what it reads to the client: pumpOutputs for remotecommand (the
//     handler opens the runtime's streams, then hands the runtime reader to
//     it at `go pumpOutputs`), tunnelDown, Splice's and RelaySPDY's down
//     copiers.
//   - Writes to a client's WebSocket go through wire.Conn, whose mutex lets
//     one writer at a time at the connection (gorilla did the handshake
//     alone); the tunnel's runtime-to-client copier hands each error
//     stream's words to pfResets before they go (a pod's reset of one
//     forwarded connection must not end the forward); writes
//     to the runtime's SPDY connection go through spdyConn's mutex, a frame
//     at a time. RelaySPDY's copiers share one mutex for the client's side.
//   - The keepalive (a time.AfterFunc, no parked goroutine) pings and ends
//     idle sessions; a context.AfterFunc ends sessions when the node shuts
//     down.
//
// A function here returns only when both goroutines have ended and both
// connections are closed.
//
// # Limits
//
// Memory per session is bounded: every copy goes through one buffer per
// direction of Config.BufferSize (borrowed per frame where a session can sit
// idle, see wire.GetBuf), a client message is at most Config.MaxMessageSize
// (larger ends the session with close 1009), a resize object waiting for
// its end at most 4 KiB, the runtime's status 64 KiB, and nothing queues.
//
// Who imports it: server, and bench for its measurements; it is
// kubestream's own, not an API for code outside the module.
package translator
