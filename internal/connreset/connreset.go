// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package connreset tells a forwarded connection that the pod reset or
// broke mid-stream from every other end of a port-forward: the one case
// where the session must go on.
//
// client-go's port-forward (tools/portforward, handleConnection) ends the
// whole session, every connection and the listener with it, on any message
// on one connection's error stream. Runtimes write one when the pod resets
// a connection (a server closing with SO_LINGER 0, as PostgreSQL, TLS
// servers and HTTP servers answering before reading a large body do), so
// one reset ended `kubectl port-forward` (kubernetes#74551, #111825,
// containerd#9875). For those two errors, ECONNRESET and EPIPE, the node
// resets the connection's data stream instead and writes nothing on its
// error stream; a failure to connect at all (refused, no route, timeout)
// is still reported there, since it tells the user that nothing listens.
package connreset

import (
	"errors"
	"strings"
	"syscall"
)

// Reasons, as the metrics and logs name them.
const (
	Reset      = "connection-reset" // ECONNRESET: the pod reset the connection
	BrokenPipe = "broken-pipe"      // EPIPE: the pod closed it while we wrote
)

// Of names how err broke a forwarded connection mid-stream: Reset,
// BrokenPipe, or "" for nil and for any other error. A runtime that wraps
// the socket's error (containerd, the reference runtime) is read by
// errors.Is; one that formats it into text, by its words (FromMessage).
func Of(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ECONNRESET):
		return Reset
	case errors.Is(err, syscall.EPIPE):
		return BrokenPipe
	}
	return fromText(err.Error())
}

// messagePrefix opens what every known runtime writes on a port-forward
// error stream: cri-streaming's portforward handlers ("error forwarding
// port %d to pod %s, uid %v: %v"), which containerd 1.6, 2.x and CRI-O
// serve SPDY port-forward with, and kubestream's cri/streaming tunnel,
// which keeps cri-streaming's words. docs/guarantees.md lists them.
const messagePrefix = "error forwarding port "

// FromMessage names the reset a runtime's error-stream message reports, ""
// when it reports anything else. A route that only sees the runtime's
// words (the tunnel and the SPDY relay towards a runtime that speaks SPDY)
// reads them here and nowhere else.
func FromMessage(msg string) string {
	if !strings.HasPrefix(msg, messagePrefix) {
		return ""
	}
	return fromText(msg)
}

// fromText reads Go's texts for the two errors (syscall.Errno's), which
// the runtime's message ends with after its own wrapping.
func fromText(s string) string {
	switch {
	case strings.HasSuffix(s, syscall.ECONNRESET.Error()):
		return Reset
	case strings.HasSuffix(s, syscall.EPIPE.Error()):
		return BrokenPipe
	}
	return ""
}
