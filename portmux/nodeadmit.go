// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

// This file is what the node admits: connection ids, the session's caps
// (connections, buffered bytes, descriptors), and refusals, which go to the
// client through one writer with a bounded queue.

import (
	"fmt"
	"strconv"
	"time"
)

// ClientError is the client's own word on why it ended the session; the
// text is the client's, so it is quoted wherever it is shown.
type ClientError struct{ Message string }

func (e *ClientError) Error() string { return "client ended the session: " + strconv.Quote(e.Message) }

// admitConn charges a new pod-side connection to the session and issues
// its id; over: the session ended; full: a cap is reached (nothing is
// charged and no id spent).
func (n *node) admitConn() (id uint32, over, full bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.isDone():
		return 0, true, false
	case n.cfg.MaxConns > 0 && len(n.mux.conns) >= n.cfg.MaxConns,
		n.cfg.MaxBuffered > 0 && n.reserved+Window > n.cfg.MaxBuffered:
		return 0, false, true
	}
	if n.budget != nil && !n.budget.Take() {
		return 0, false, true
	}
	n.reserved += Window
	id = n.lastConn
	for {
		if id++; id == 0 {
			n.wrapped = true
			continue
		}
		if _, live := n.mux.conns[id]; !live {
			break
		}
	}
	n.lastConn = id
	return id, false, false
}

// openAssoc opens a UDP association the client asked for. It dials
// inline, so the datagrams that follow the open find it; a refusal is
// queued for writeRefusals, as the reader loop never writes.
func (n *node) openAssoc(f Frame) error {
	allowed := false
	for _, p := range n.cfg.UDPPorts {
		allowed = allowed || p == f.Port
	}
	n.mu.Lock()
	if f.ID <= n.lastAssoc {
		n.mu.Unlock()
		return fmt.Errorf("%w: association %d opened after %d (ids must rise)", ErrFrame, f.ID, n.lastAssoc)
	}
	n.lastAssoc = f.ID
	full := n.cfg.MaxConns > 0 && len(n.udp) >= n.cfg.MaxConns
	n.mu.Unlock()
	var reason string
	capped := true // refused by a cap (counted), not for a port outside the session
	switch {
	case !allowed || n.cfg.UDP == nil:
		reason, capped = fmt.Sprintf("port %d is not forwarded in this session", f.Port), false
	case full:
		reason = fmt.Sprintf("too many UDP associations in this session (at most %d)", n.cfg.MaxConns)
	case n.budget != nil && !n.budget.Take():
		reason = "too many streaming sessions and connections on this node"
	}
	if reason != "" && capped {
		n.refuse.Add(1)
	}
	if reason != "" {
		return n.refuseAssoc(f.ID, reason)
	}
	c, err := n.cfg.UDP.DialUDP(f.Port)
	if err != nil {
		n.giveDescriptor()
		return n.refuseAssoc(f.ID, err.Error())
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
		n.giveDescriptor()
		return nil
	}
	n.conns.Add(1)
	n.spawn(a.pumpNode)
	return nil
}

// refuseAssoc queues the refusal of association id; a full queue is a
// client that opens and does not read its answers: a protocol error.
func (n *node) refuseAssoc(id uint32, reason string) error {
	select {
	case n.refusals <- Frame{Type: TypeAssocClose, ID: id, Payload: text(reason)}:
		return nil
	default:
		return fmt.Errorf("%w: %d refused associations not yet read by the client", ErrFrame, maxPendingRefusals)
	}
}

// writeRefusals is the session's one writer of refusals, until it ends.
func (n *node) writeRefusals() {
	defer n.wg.Done()
	for {
		select {
		case <-n.done:
			return
		case f := <-n.refusals:
			if n.send(f) != nil {
				return
			}
		}
	}
}
