// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Listener is a reverse port's listener in the pod's network namespace.
type Listener struct {
	Port uint16
	L    net.Listener
}

// UDPDialer creates a UDP socket connected to a pod port, in the pod's
// network namespace (internal/netns.Namespace is one).
type UDPDialer interface {
	DialUDP(port uint16) (*net.UDPConn, error)
}

// Descriptors is the node's descriptor budget: each pod-side connection
// and UDP socket a session opens takes one (Take false: none left, the
// connection or association is refused) and gives it back when it closes.
type Descriptors interface {
	Take() bool
	Give()
}

// NodeConfig is the node end of one session.
type NodeConfig struct {
	// Reverse: the listeners, already created; the session owns them.
	Listeners []Listener
	// UDP: the pod ports associations may reach, and how sockets to them
	// are made.
	UDPPorts []uint16
	UDP      UDPDialer
	// MaxConns caps concurrent connections (reverse) or associations
	// (UDP) in the session; 0: no cap. Over it, a pod connection is reset
	// at once and an association is closed with a reason.
	MaxConns int
	// MaxBuffered caps the bytes the session may hold for pod-side peers
	// that do not read (0: no cap beyond MaxConns). Each connection
	// reserves a whole Window of it when it opens, so the cap holds
	// whatever the client sends; a connection the cap cannot cover is
	// refused as one over MaxConns is.
	MaxBuffered int
	// Descriptors, when set, is charged for every connection and UDP
	// socket (listeners are the caller's to count).
	Descriptors Descriptors
	// IdleTimeout ends a session with no data for this long (0: never);
	// AssocIdleTimeout closes a UDP association idle this long.
	IdleTimeout, AssocIdleTimeout time.Duration
	Keepalive                     Keepalive
}

// NodeResult is how a node session went.
type NodeResult struct {
	Conns, Refused   int    // connections or associations opened; refused by MaxConns
	BytesUp, BytesDn uint64 // client→pod, pod→client
	Err              error  // why it ended (nil: the client closed it)
}

// maxPendingRefusals bounds the refusals queued for the client: one that
// opens faster than it reads its answers is ended (a protocol error), so a
// refused frame costs the node a queue slot, never a goroutine.
const maxPendingRefusals = 256

// node is the node end's state beyond the mux.
type node struct {
	*mux
	cfg           NodeConfig
	conns, refuse atomic.Int64
	// refusals is the queue to writeRefusals, the session's one writer of
	// refusals (the reader loop never writes).
	refusals chan Frame
	// Under mu: the last connection id issued (ids skip 0 and live
	// entries: they never wrap into one), whether they wrapped, and the
	// last association id the client opened (they must rise).
	lastConn  uint32
	wrapped   bool
	lastAssoc uint32
}

// ServeNode runs the node end of a session on ws until the client leaves,
// ctx ends (the peer is told context.Cause), or an error; every listener,
// socket and goroutine is gone when it returns.
func ServeNode(ctx context.Context, ws *websocket.Conn, cfg NodeConfig) NodeResult {
	n := &node{mux: newMux(ws, cfg.Keepalive, true, cfg.IdleTimeout), cfg: cfg, refusals: make(chan Frame, maxPendingRefusals)}
	n.budget = cfg.Descriptors
	n.wg.Add(3)
	go n.stopOnContext(ctx)
	go n.sweep(cfg.AssocIdleTimeout)
	go n.writeRefusals()
	for _, l := range cfg.Listeners {
		n.spawn(func() { n.accept(l) })
	}
	ready := cfg.UDPPorts
	for _, l := range cfg.Listeners {
		ready = append(ready, l.Port)
	}
	for _, p := range ready {
		_ = n.send(Frame{Type: TypeReady, Port: p}) // a failed write ends the session
	}
	err := n.readLoop(n.handle)
	var pe *websocket.CloseError
	var ce *ClientError
	switch {
	case errors.As(err, &pe) && (pe.Code == websocket.CloseNormalClosure || pe.Code == websocket.CloseGoingAway):
		err = nil // the client closed the session
	case errors.As(err, &ce):
	case errors.Is(err, ErrFrame):
		err = fmt.Errorf("client broke the protocol: %w", err)
	default:
		err = fmt.Errorf("client connection lost: %w", err)
	}
	n.end(err, err != nil)
	for _, l := range cfg.Listeners {
		_ = l.L.Close() // done with it; unblocks accept
	}
	n.wg.Wait()
	// The client's close reply (or the grace) before the TCP close, so a
	// client still sending cannot reset what it has yet to read.
	n.wc.Drain()
	n.wc.Shutdown()
	res := NodeResult{Conns: int(n.conns.Load()), Refused: int(n.refuse.Load()), BytesUp: n.up.Load(), BytesDn: n.down.Load()}
	if n.err != nil && !errors.Is(n.err, errClosed) {
		res.Err = n.err
	}
	if err == nil && n.err != nil {
		res.Err = n.err // the node's own end (ctx, idle)
	}
	return res
}

// accept streams each connection the pod makes to a reverse port.
func (n *node) accept(l Listener) {
	n.spawn(func() { <-n.done; _ = l.L.Close() }) // unblocks Accept at the end
	for {
		c, err := l.L.Accept()
		if err != nil {
			select {
			case <-n.done:
			default:
				n.end(fmt.Errorf("listener on pod port %d: %w", l.Port, err), true)
			}
			return
		}
		id, over, full := n.admitConn()
		if over {
			closeConn(c, true)
			return
		}
		if full {
			n.refuse.Add(1)
			closeConn(c, true)
			continue
		}
		s := n.newStream(id, c)
		n.mu.Lock()
		n.mux.conns[id] = s
		n.mu.Unlock()
		n.conns.Add(1)
		if n.send(Frame{Type: TypeOpen, ID: id, Port: l.Port, Payload: []byte(c.RemoteAddr().String())}) != nil {
			return
		}
		s.start()
	}
}

// handle applies one frame from the client; it never blocks on a pod peer.
func (n *node) handle(f Frame) error {
	switch f.Type {
	case TypeData, TypeWindow, TypeCloseWrite, TypeReset, TypeError:
		if f.ID == 0 { // the client's session error
			return &ClientError{Message: string(f.Payload)}
		}
		n.mu.Lock()
		s := n.mux.conns[f.ID]
		unknown := s == nil && !n.wrapped && f.ID > n.lastConn
		n.mu.Unlock()
		switch {
		case unknown:
			return fmt.Errorf("%w: connection %d was never opened", ErrFrame, f.ID)
		case s == nil: // ended here first: in flight, dropped
			return nil
		case f.Type == TypeData:
			return s.deliver(f.Payload)
		}
		return s.control(f)
	case TypeAssocOpen:
		return n.openAssoc(f)
	case TypeDatagram:
		n.mu.Lock()
		a, unknown := n.udp[f.ID], f.ID > n.lastAssoc
		n.mu.Unlock()
		if unknown {
			return fmt.Errorf("%w: association %d was never opened", ErrFrame, f.ID)
		}
		if a != nil { // else closed or refused here first: UDP may drop
			a.touch()
			n.carried(len(f.Payload), false)
			_, _ = a.conn.Write(f.Payload) // a full socket drops, as UDP does
		}
		return nil
	case TypeAssocClose:
		n.mu.Lock()
		a, unknown := n.udp[f.ID], f.ID > n.lastAssoc
		n.mu.Unlock()
		if unknown {
			return fmt.Errorf("%w: association %d was never opened", ErrFrame, f.ID)
		}
		if a != nil {
			a.close()
		}
		return nil
	}
	return fmt.Errorf("%w: frame type 0x%02x is not for the node", ErrFrame, byte(f.Type))
}
