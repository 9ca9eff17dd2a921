// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"
)

// open registers a connection the node opened at once (its data may
// follow before the local dial ends) and dials the local address.
func (c *client) open(f Frame) error {
	local := ""
	for _, r := range c.cfg.Reverse {
		if r.Remote == f.Port {
			local = r.Local
		}
	}
	c.mu.Lock()
	_, dup := c.mux.conns[f.ID]
	s := c.newStream(f.ID, nil)
	over := c.isDone()
	if !dup && !over {
		c.mux.conns[f.ID] = s
	}
	c.mu.Unlock()
	switch {
	case dup:
		return fmt.Errorf("%w: connection %d opened twice", ErrFrame, f.ID)
	case over:
		return nil
	}
	c.spawn(func() { c.dial(s, local, f.Port) })
	return nil
}

// dial connects a node-opened connection to its local address, or resets
// it with the reason.
func (c *client) dial(s *stream, local string, port uint16) {
	if local == "" {
		s.finish(fmt.Sprintf("pod port %d is not forwarded by this client", port), true)
		return
	}
	_, lport, _ := net.SplitHostPort(local)
	c.say("Handling connection for %s", lport)
	timeout := c.cfg.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	conn, err := net.DialTimeout("tcp", local, timeout)
	if err != nil {
		c.say("error: connection for %s: %v", lport, err)
		s.finish(err.Error(), true)
		return
	}
	s.mu.Lock()
	dead := s.dead
	if !dead {
		s.conn = conn
	}
	s.mu.Unlock()
	if dead {
		closeConn(conn, true)
		return
	}
	s.start()
}

// pumpLocal: datagrams from local peers → datagram frames, a new
// association for each new peer.
func (c *client) pumpLocal(u UDPForward) {
	buf := make([]byte, MaxDatagram+1)
	prefix := u.Conn.LocalAddr().String() + "|"
	for {
		n, peer, err := u.Conn.ReadFromUDP(buf)
		if err != nil {
			if isRefused(err) {
				continue
			}
			if !c.isDone() {
				c.end(fmt.Errorf("local UDP socket %s: %w", u.Conn.LocalAddr(), err), true)
			}
			return
		}
		if n > MaxDatagram {
			continue // cannot be carried whole; UDP may drop it
		}
		a, err := c.assocFor(u, peer, prefix+peer.String())
		if err != nil {
			return
		}
		a.touch()
		c.carried(n, false)
		if c.send(Frame{Type: TypeDatagram, ID: a.id, Payload: buf[:n]}) != nil {
			return
		}
	}
}

// assocFor finds the live association of a local peer, or opens one.
func (c *client) assocFor(u UDPForward, peer *net.UDPAddr, key string) (*assoc, error) {
	c.mu.Lock()
	a := c.peers[key]
	if a != nil && c.udp[a.id] == a {
		c.mu.Unlock()
		return a, nil
	}
	id := c.next.Add(1)
	if id == 0 { // the node wants ids that rise: a session has 2³²-1
		c.next.Store(math.MaxUint32)
		c.mu.Unlock()
		return nil, errors.New("this session has used every association id; start another")
	}
	a = &assoc{m: c.mux, id: id, conn: u.Conn, peer: peer, last: time.Now()}
	c.peers[key] = a
	c.udp[a.id] = a
	c.mu.Unlock()
	c.say("Handling datagrams from %s for %s", peer, strconv.Itoa(int(u.Remote)))
	return a, c.send(Frame{Type: TypeAssocOpen, ID: a.id, Port: u.Remote})
}
