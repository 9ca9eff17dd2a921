// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package wire is the WebSocket side of the Kubernetes streaming protocols,
// shared by both ends kubestream has: the translator at the node and the
// runtime-side server (cri/streaming). It holds the RFC 6455 frame layout;
// the one parser of frame headers, Follower, which every reader of frames
// uses (Conn's reader of a client's frames, the splice's followers of both
// directions and its answering of a client's pings); a server connection
// (Conn) that owns a session's writes, keepalive, idle timeout and end
// (status, close frame, bounded wait for the peer's close); the v5 resize
// stream, the v5 client-message reader (V5Reader) and the v5 status
// message.
//
// It depends on gorilla/websocket (the handshake alone: after it, Conn
// reads and writes the connection itself and gorilla's Conn is not used
// again, so the two never share it), apimachinery (the Status type and the channel numbers),
// k8s.io/utils/exec (exit codes), golang.org/x/sys/unix (Linux: splice(2),
// raw reads, a socket's unacknowledged bytes) and internal/upgrade
// (upgrade.Unread, for the bytes an HTTP server read ahead), nothing else,
// so a runtime vendoring cri/streaming takes in no SPDY and no HTTP routing
// through it.
//
// # Concurrency
//
// A Conn has one reader (NextReader and the readers it returns, and Drain)
// and any number of writers, which it serialises under one mutex: whole
// frames (WriteFrame), a message built in place behind room for its header
// (WriteInPlace), a channel's message from a buffer or a prefix and a
// payload (WriteChannel, WritePrefixed), a channel's messages from a pipe
// (ReadFromChannel), and the session's end (CloseWith). The keepalive runs
// on a timer, never a parked goroutine.
package wire
