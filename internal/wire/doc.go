// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package wire is the WebSocket side of the Kubernetes streaming protocols,
// shared by both ends kubestream has: the translator at the node (and
// portmux's node end, reverse and UDP port-forward) and the runtime-side
// server (cri/streaming). It holds the RFC 6455 frame layout;
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
// Reading order, each file before the files it uses: hijack.go (the
// handshake: NewUpgrader, and Hijacker, which puts back what the HTTP
// server read ahead), v5.go (V5Reader, a v5 client's messages) and
// status.go (the v5 status message), stream.go (BinaryStream: a Conn's
// binary messages as one byte stream), splice.go (ReadFromChannel: a
// pipe's output as a channel's messages) with splice_linux.go and
// splice_other.go (splice(2) into the socket, on Linux), keepalive.go (the
// pings and the idle timeout, on a timer), control.go (a control frame
// read: a ping answered, a close), close.go (the session's end: CloseWith
// and the bounded wait for the peer's close), write.go (every write, one
// at a time), read.go (NextReader: the peer's frames read and checked; the
// opcodes), conn.go (Conn, the state its methods share),
// rawread_linux.go and rawread_other.go (what a Conn reads from: on Linux,
// read(2) inside the poller's callback), unacked_linux.go and
// unacked_other.go (a socket's bytes the peer has yet to acknowledge, for
// the close's wait), then resize.go (the v5 resize stream), follow.go
// (Follower, the one parser of frame headers), frame.go (the frame
// layout), bufpool.go (copy buffers lent by size), stage.go (Stage, which
// every hand-written reader reads through) and limits.go (Limits).
//
// What runs back up the order: read.go, a Conn's reader, hands a
// control frame to control.go (control) and ends the session on a broken
// frame with close.go's CloseWith, while both read through read.go (a real
// loop: what a frame calls for, a control frame's answer or the session's
// end, reads on through the reader); conn.go's Conn holds its read side's
// state (readState), defined in read.go beside the one loop that touches
// it; rawread_linux.go turns a system call's error into an errno with
// splice_linux.go's errnoOf, the Linux files' one helper for it.
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
