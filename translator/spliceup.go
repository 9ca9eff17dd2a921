// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"net"
	"sync/atomic"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/internal/wire"
)

// spliceUp copies the client's bytes to the runtime unchanged (the runtime
// checks its frames itself) until the client's side ends, then half-closes
// the runtime's. Its buffer is held for the session: the copy blocks in a
// read with it, as io.CopyBuffer does.
func spliceUp(client, rt net.Conn, size int, cf *clientFollower, activity *atomic.Uint64) uint64 {
	buf := make([]byte, size)
	var up uint64
	rtGone := false
	for {
		n, err := client.Read(buf)
		if n > 0 {
			// What is data, for the idle timeout (kubectl's pings are
			// not), and what an observer sees, in one pass.
			data := cf.data
			cf.follow(buf[:n])
			if cf.data != data {
				activity.Add(1)
			}
		}
		if n > 0 && !rtGone {
			if _, werr := rt.Write(buf[:n]); werr != nil {
				// The runtime's side is gone but the client's is not: go
				// on reading it to its end, so what it still sends is
				// not left unread at our close.
				rtGone = true
			} else {
				up += uint64(n)
			}
		}
		if err != nil {
			_ = upgrade.CloseWrite(rt) // the peer is gone already if it fails
			return up
		}
	}
}

// spliceUpAnsweringPings is spliceUp for legacy protocols: it follows the
// client's frames and answers its pings itself (under cw, between the down
// copy's frames) instead of passing them on. A runtime's legacy WebSocket
// server that stalls behind a slow reader leaves forwarded pings unread,
// and its bare close at the end then resets what the node had yet to pass
// on; the pings still keep the client's own path alive.
func spliceUpAnsweringPings(client, rt net.Conn, cw *clientWriter, size int, cf *clientFollower) uint64 {
	buf := make([]byte, size)
	var f wire.Follower
	var up uint64
	rtGone := false
	forward := func(b []byte) {
		cf.follow(b) // before the write: b is still masked, as read
		if rtGone {
			return
		}
		if _, err := rt.Write(b); err != nil {
			rtGone = true // read the client on to its end all the same
			return
		}
		up += uint64(len(b))
	}
	// A client's ping being answered: its header, and its payload as it
	// comes (at most wire.MaxControl bytes).
	var ping wire.Header
	var pingBuf [wire.MaxControl]byte
	var pingPayload []byte
	inPing := false
	pong := func() {
		wire.Unmask(ping.Key, 0, pingPayload)
		cw.pongFor(pingPayload)
		inPing = false
	}
	defer upgrade.CloseWrite(rt)
	for {
		n, err := client.Read(buf)
		for b := buf[:n]; len(b) > 0; {
			h, header, payload, rest := f.Next(b)
			b = rest
			switch {
			case header && h.Op == websocket.PingMessage && h.Fin && h.Masked && h.Len <= wire.MaxControl:
				ping, pingPayload, inPing = h, pingBuf[:0], true
				if h.Len == 0 {
					pong()
				}
			case header:
				forward(f.RawHeader())
			case inPing:
				pingPayload = append(pingPayload, payload...)
				if len(pingPayload) == int(ping.Len) {
					pong()
				}
			default:
				forward(payload)
			}
		}
		if err != nil {
			return up
		}
	}
}
