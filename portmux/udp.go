// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"net"
	"sync"
	"time"
)

// assoc is one UDP association. At the node it owns a socket connected to
// the pod's port; at the client it names a local peer of a socket the
// client owns (peer set, conn shared, not closed here).
type assoc struct {
	m      *mux
	id     uint32
	conn   *net.UDPConn
	peer   *net.UDPAddr // client end: where replies go
	owned  bool         // the socket is this association's (node end)
	mu     sync.Mutex
	last   time.Time
	closed bool
}

// touch marks the association busy (idle timeout).
func (a *assoc) touch() {
	a.mu.Lock()
	a.last = time.Now()
	a.mu.Unlock()
}

func (a *assoc) idleFor() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return time.Since(a.last)
}

// close releases the association once; only the node's socket is closed.
func (a *assoc) close() bool {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return false
	}
	a.closed = true
	a.mu.Unlock()
	if a.owned {
		_ = a.conn.Close() // done with it: a failed close changes nothing
		a.m.giveDescriptor()
	}
	a.m.mu.Lock()
	if a.m.udp[a.id] == a {
		delete(a.m.udp, a.id)
	}
	a.m.mu.Unlock()
	return true
}

// end closes the association and tells the peer why.
func (a *assoc) end(reason string) {
	if a.close() {
		_ = a.m.send(Frame{Type: TypeAssocClose, ID: a.id, Payload: text(reason)}) // the session's end covers a failure
	}
}

// pumpNode: replies from the pod's port → datagram frames, one for one.
func (a *assoc) pumpNode() {
	buf := make([]byte, MaxDatagram+1)
	for {
		n, err := a.conn.Read(buf)
		if err != nil {
			if isRefused(err) {
				continue // an ICMP port unreachable: UDP goes on, as a socket does
			}
			a.end(err.Error())
			return
		}
		if n > MaxDatagram {
			continue // cannot be carried whole; UDP may drop it
		}
		a.touch()
		a.m.carried(n, true)
		if a.m.send(Frame{Type: TypeDatagram, ID: a.id, Payload: buf[:n]}) != nil {
			return
		}
	}
}

// sweep closes associations idle longer than timeout, checking every
// quarter of it, until the session ends.
func (m *mux) sweep(timeout time.Duration) {
	defer m.wg.Done()
	if timeout <= 0 {
		return
	}
	t := time.NewTicker(max(timeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		m.mu.Lock()
		var idle []*assoc
		for _, a := range m.udp {
			if a.idleFor() > timeout {
				idle = append(idle, a)
			}
		}
		m.mu.Unlock()
		for _, a := range idle {
			a.end("idle timeout")
		}
	}
}
