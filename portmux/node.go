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

// node is the node end's state beyond the mux.
type node struct {
	*mux
	cfg           NodeConfig
	next          atomic.Uint32
	conns, refuse atomic.Int64
}

// ServeNode runs the node end of a session on ws until the client leaves,
// ctx ends (the peer is told context.Cause), or an error; every listener,
// socket and goroutine is gone when it returns.
func ServeNode(ctx context.Context, ws *websocket.Conn, cfg NodeConfig) NodeResult {
	n := &node{mux: newMux(ws, cfg.Keepalive, true), cfg: cfg}
	n.wg.Add(3)
	go n.stopOnContext(ctx)
	go n.keepalive(cfg.IdleTimeout)
	go n.sweep(cfg.AssocIdleTimeout)
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
	switch {
	case errors.As(err, &pe) && (pe.Code == websocket.CloseNormalClosure || pe.Code == websocket.CloseGoingAway):
		err = nil // the client closed the session
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
	_ = ws.Close() // done with it: a failed close changes nothing
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
		id := n.next.Add(1)
		s := n.newStream(id, c)
		n.mu.Lock()
		full := n.cfg.MaxConns > 0 && len(n.mux.conns) >= n.cfg.MaxConns
		over := n.isDone()
		if !full && !over {
			n.mux.conns[id] = s
		}
		n.mu.Unlock()
		if over {
			closeConn(c, true)
			return
		}
		if full {
			n.refuse.Add(1)
			closeConn(c, true)
			continue
		}
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
			return fmt.Errorf("client ended the session: %s", f.Payload)
		}
		n.mu.Lock()
		s := n.mux.conns[f.ID]
		n.mu.Unlock()
		switch {
		case s == nil: // ended here first, or never existed: dropped
			return nil
		case f.Type == TypeData:
			return s.deliver(f.Payload)
		}
		return s.control(f)
	case TypeAssocOpen:
		return n.openAssoc(f)
	case TypeDatagram:
		n.mu.Lock()
		a := n.udp[f.ID]
		n.mu.Unlock()
		if a != nil { // else closed here first: UDP may drop
			a.touch()
			n.carried(len(f.Payload), false)
			_, _ = a.conn.Write(f.Payload) // a full socket drops, as UDP does
		}
		return nil
	case TypeAssocClose:
		n.mu.Lock()
		a := n.udp[f.ID]
		n.mu.Unlock()
		if a != nil {
			a.close()
		}
		return nil
	}
	return fmt.Errorf("%w: frame type 0x%02x is not for the node", ErrFrame, byte(f.Type))
}

// openAssoc opens a UDP association the client asked for. It dials
// inline, so the datagrams that follow the open find it; a refusal is
// sent from a goroutine, as the reader loop never writes.
func (n *node) openAssoc(f Frame) error {
	allowed := false
	for _, p := range n.cfg.UDPPorts {
		allowed = allowed || p == f.Port
	}
	n.mu.Lock()
	_, dup := n.udp[f.ID]
	full := n.cfg.MaxConns > 0 && len(n.udp) >= n.cfg.MaxConns
	n.mu.Unlock()
	var reason string
	switch {
	case dup:
		return fmt.Errorf("%w: association %d opened twice", ErrFrame, f.ID)
	case !allowed || n.cfg.UDP == nil:
		reason = fmt.Sprintf("port %d is not forwarded in this session", f.Port)
	case full:
		n.refuse.Add(1)
		reason = fmt.Sprintf("too many UDP associations in this session (at most %d)", n.cfg.MaxConns)
	}
	var c *net.UDPConn
	if reason == "" {
		var err error
		if c, err = n.cfg.UDP.DialUDP(f.Port); err != nil {
			reason = err.Error()
		}
	}
	if reason != "" {
		n.spawn(func() { _ = n.send(Frame{Type: TypeAssocClose, ID: f.ID, Payload: text(reason)}) })
		return nil
	}
	a := &assoc{m: n.mux, id: f.ID, conn: c, owned: true, last: time.Now()}
	n.mu.Lock()
	over := n.isDone()
	if !over {
		n.udp[f.ID] = a
	}
	n.mu.Unlock()
	if over {
		_ = c.Close() // the session ended meanwhile
		return nil
	}
	n.conns.Add(1)
	n.spawn(a.pumpNode)
	return nil
}
