// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// ReverseForward: connections to pod port Remote are dialled to Local.
type ReverseForward struct {
	Remote uint16
	Local  string // host:port
}

// UDPForward: datagrams to the bound local socket Conn go to pod port
// Remote, each local peer its own association. The session owns Conn.
type UDPForward struct {
	Remote uint16
	Conn   *net.UDPConn
}

// ClientConfig is the client end of one session: Reverse or UDP, not both.
type ClientConfig struct {
	Pod     string // NAME, for the lines written to Out
	Reverse []ReverseForward
	UDP     []UDPForward
	// Out gets kubectl port-forward's lines ("Forwarding from …",
	// "Handling connection for …"); nil: none.
	Out io.Writer
	// Ready, when set, gets each forwarded pod port once the node serves it.
	Ready       chan<- uint16
	DialTimeout time.Duration
	Keepalive   Keepalive
}

// SessionError is the node's own word on why it ended the session. The
// text is the node's: Error quotes it, so that no byte of it reaches a
// terminal or a log line as control characters.
type SessionError struct{ Message string }

func (e *SessionError) Error() string { return strconv.Quote(e.Message) }

type client struct {
	*mux
	cfg   ClientConfig
	next  atomic.Uint32
	peers map[string]*assoc // "local|peer" → association, under mu
}

// ServeClient runs the client end on ws until ctx ends (nil), the node
// ends the session (a *SessionError with its reason) or the connection is
// lost; every local connection, socket and goroutine is gone when it
// returns.
func ServeClient(ctx context.Context, ws *websocket.Conn, cfg ClientConfig) error {
	c := &client{mux: newMux(ws, cfg.Keepalive, false, 0), cfg: cfg, peers: map[string]*assoc{}}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-ctx.Done():
			c.end(nil, false)
		case <-c.done:
		}
	}()
	if cfg.Keepalive.PingPeriod > 0 {
		c.wg.Add(1)
		go c.keepalive()
	}
	for _, u := range cfg.UDP {
		c.spawn(func() { c.pumpLocal(u) })
	}
	err := c.readLoop(c.handle)
	var se *SessionError
	var ce *websocket.CloseError
	switch {
	case c.isDone() && c.err == nil:
		err = nil // ctx ended: the user's stop
	case errors.As(err, &se):
	case errors.As(err, &ce) && ce.Code == websocket.CloseNormalClosure:
		err = errors.New("the node closed the session")
	default:
		err = fmt.Errorf("lost connection to the node: %w", err)
	}
	c.end(err, err != nil && !errors.As(err, &se))
	for _, u := range cfg.UDP {
		_ = u.Conn.Close() // done with it; unblocks pumpLocal
	}
	c.wg.Wait()
	_ = ws.Close() // done with it: a failed close changes nothing
	return err
}

func (c *client) say(format string, a ...any) {
	if c.cfg.Out != nil {
		fmt.Fprintf(c.cfg.Out, format+"\n", a...)
	}
}

// handle applies one frame from the node; it never blocks on a local peer.
func (c *client) handle(f Frame) error {
	switch f.Type {
	case TypeReady:
		c.ready(f.Port)
		return nil
	case TypeOpen:
		return c.open(f)
	case TypeError:
		if f.ID == 0 {
			return &SessionError{Message: string(f.Payload)}
		}
		c.say("error: connection %d: %s", f.ID, f.Payload)
		fallthrough
	case TypeData, TypeWindow, TypeCloseWrite, TypeReset:
		c.mu.Lock()
		s := c.mux.conns[f.ID]
		c.mu.Unlock()
		switch {
		case s == nil:
			return nil
		case f.Type == TypeData:
			return s.deliver(f.Payload)
		}
		return s.control(f)
	case TypeDatagram:
		c.mu.Lock()
		a := c.udp[f.ID]
		c.mu.Unlock()
		if a != nil {
			a.touch()
			c.carried(len(f.Payload), true)
			_, _ = a.conn.WriteToUDP(f.Payload, a.peer) // a full socket drops, as UDP does
		}
		return nil
	case TypeAssocClose:
		c.mu.Lock()
		a := c.udp[f.ID]
		c.mu.Unlock()
		if a != nil {
			a.close()
		}
		return nil
	}
	return fmt.Errorf("%w: frame type 0x%02x is not for the client", ErrFrame, byte(f.Type))
}

func (c *client) ready(port uint16) {
	for _, r := range c.cfg.Reverse {
		if r.Remote == port {
			c.say("Forwarding from pod/%s:%d -> %s", c.cfg.Pod, port, r.Local)
		}
	}
	for _, u := range c.cfg.UDP {
		if u.Remote == port {
			c.say("Forwarding from %s -> pod/%s:%d (udp)", u.Conn.LocalAddr(), c.cfg.Pod, port)
		}
	}
	if c.cfg.Ready != nil {
		select {
		case c.cfg.Ready <- port:
		case <-c.done:
		}
	}
}
