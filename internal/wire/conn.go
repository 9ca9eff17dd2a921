// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// ErrSessionClosed is returned by writes after the session sent its close frame.
var ErrSessionClosed = errors.New("websocket session already closed")

// Conn owns one WebSocket connection after gorilla's handshake: gorilla
// does the handshake alone, and from then on every byte is read and written
// here (gorilla's own reads and writes are never mixed in, as its contract
// requires). Conn serialises the writes and owns the end of the session: a
// status, a close frame, a bounded wait for the peer's close, then the TCP
// close. Ending with a bare
// TCP close while the peer still has unread data makes its kernel answer the
// peer's next ping with a reset and lose that data (upstream's translator
// v0.37 does this after its status: a slow reader loses output), so every
// end goes through CloseWith.
type Conn struct {
	nc  net.Conn // the upgraded connection, gorilla done with it
	cfg *Limits

	mu sync.Mutex // guards writes, and the setting of closed

	// activity counts reads of client payload and writes of data frames;
	// the keepalive timer compares it between ticks to find idle sessions
	// without a clock read per frame.
	activity atomic.Uint64
	// closed: a close frame was sent (or the connection shut); no more
	// data frames. Set under mu, read with or without it.
	closed atomic.Bool
	shut   atomic.Bool // Shutdown ran: the grace's timers stop

	timer *time.Timer

	// Deadlines are moved at most once a second: setting one costs a
	// timer update in the runtime poller, too much to pay per frame for a
	// limit measured in seconds.
	rdmu          sync.Mutex // guards readDeadline; apart from mu so a slow write never stalls reading
	readDeadline  time.Time
	writeDeadline time.Time // under mu

	rd readState // the read side (read.go), the read loop's alone

	src   io.Reader // what every byte after the handshake is read from (newSource)
	plain bool      // the connection is plain TCP: WriteChannel writes p as is
	hdr   []byte    // a frame's header being written, under mu
	iov   [2][]byte // writeMessage's writev, under mu
}

// Slack is how far a deadline may lag behind where it would be if moved on
// every frame: a second, or a quarter of the window when that is shorter.
func Slack(window time.Duration) time.Duration { return min(time.Second, window/4) }

// NewConn takes over the connection ws upgraded: from then on only the Conn
// reads and writes it, and ws is not used again.
func NewConn(ws *websocket.Conn, cfg *Limits) *Conn {
	nc := ws.NetConn()
	_, plain := nc.(*net.TCPConn)
	c := &Conn{nc: nc, cfg: cfg, plain: plain, src: newSource(nc)}
	c.extendReadDeadline()
	return c
}

// extendReadDeadline keeps a live peer's connection open. Once the session is
// closing the grace deadline set by CloseWith must win.
func (c *Conn) extendReadDeadline() {
	if c.closed.Load() {
		return
	}
	window := c.cfg.PingPeriod + c.cfg.PongTimeout
	want := time.Now().Add(window)
	c.rdmu.Lock()
	defer c.rdmu.Unlock()
	if !c.closed.Load() && want.Sub(c.readDeadline) > Slack(window) {
		c.readDeadline = want
		_ = c.nc.SetReadDeadline(want) // fails only once closed; its I/O then says why
	}
}

// Closed reports whether the session sent its close frame: from then on
// only the peer's close, or the grace, is awaited.
func (c *Conn) Closed() bool { return c.closed.Load() }
