// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package portmux is the wire protocol of kubestream's two extra
// port-forward modes, reverse (a listener in the pod, each accepted
// connection streamed to the client, which dials a local port) and UDP
// (datagrams between a local peer and a pod port), and the two ends of a
// session: Node (listeners and UDP sockets in the pod's network namespace)
// and Client (local dials and a local UDP socket). Each WebSocket binary
// message is exactly one frame. It knows nothing of HTTP routing or CRI;
// docs/port-forward-modes.md is the specification.
//
// Reading order, each file before the files it uses: node.go (ServeNode,
// the node end: listeners accepted, the client's frames applied) with
// nodeadmit.go (its caps: connection ids, associations, refusals through
// one queue), client.go (ServeClient, the client end) with client_conn.go
// (its local dials and UDP socket) and refused.go (a UDP peer's refusal),
// mux.go (what both ends share: the WebSocket read and written, the
// session's end), stream.go (one TCP connection: its window and its two
// copiers), udp.go (one association, and the sweep of idle ones), then
// frame.go (the frames).
//
// What runs back up the order: nodeadmit.go and client_conn.go hang on
// node.go's node and client.go's client (one type's methods spread by
// job); stream.go and udp.go hang newStream and sweep on mux.go's mux,
// beside what they make; and mux.go's end closes every stream and
// association, which write through the mux (a real loop: the session owns
// its connections, and each connection's frames go out through the
// session).
//
// # Concurrency
//
// One goroutine reads the WebSocket (readLoop, on ServeNode's or
// ServeClient's caller) and never blocks on a local peer: data waits in
// its connection's queue, at most a Window. Each connection has two
// goroutines (upstream: local reads to frames within the peer's credit;
// downstream: the queue to local writes; at the client a dial first). At
// the node each association has one (its socket's reads) and each
// listener two (accept, and its close at the end), beside the session's
// watcher of ctx, sweep of idle associations and writer of refusals; at
// the client each local UDP socket has one, beside the watcher of ctx and
// the keepalive (when pinging). All are counted in the session's
// WaitGroup and end with it, before ServeNode or ServeClient returns. Any
// of them may write a frame: at the node internal/wire's connection
// serialises them, at the client a mutex.
//
// Who imports it: server (the node end) and cmd/kubectl-kubestream (the
// client end); the protocol is docs/port-forward-modes.md, the Go API is
// kubestream's own.
package portmux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The WebSocket subprotocols that select a mode. A server that does not
// serve a mode never answers 101 with its name.
const (
	ReverseProtocol = "v1.reverse.portforward.kubestream.io"
	UDPProtocol     = "v1.udp.portforward.kubestream.io"
)

// Type is a frame's first byte.
type Type byte

const (
	TypeReady      Type = 0x01 // node→client, id 0: payload port (u16); the port is served
	TypeOpen       Type = 0x02 // node→client: a pod-side connection id on port (u16) [+ peer text]
	TypeData       Type = 0x03 // both: bytes of connection id, within the receiver's window
	TypeCloseWrite Type = 0x04 // both: the sender sends no more data on id (half-close)
	TypeReset      Type = 0x05 // both: connection id ended abruptly; payload: reason text
	TypeWindow     Type = 0x06 // both: payload u32, more bytes the sender of this frame can take on id
	TypeError      Type = 0x07 // both: id 0 ends the session; id ≠ 0 ends that connection; payload text
	TypeAssocOpen  Type = 0x10 // client→node: association id to pod port (u16)
	TypeDatagram   Type = 0x11 // both: exactly one datagram of association id
	TypeAssocClose Type = 0x12 // both: association id is over; payload: reason text
)

const (
	// HeaderSize is the type byte and the 32-bit id.
	HeaderSize = 5
	// MaxDatagram is the largest UDP payload over IPv4.
	MaxDatagram = 65507
	// MaxFrame bounds every frame: a header and a largest datagram.
	MaxFrame = HeaderSize + MaxDatagram
	// MaxData is the largest data payload a sender puts in one frame.
	MaxData = 32 << 10
	// Window is each receiver's initial per-connection credit, in bytes.
	Window = 256 << 10
	// maxText bounds reason and error texts.
	maxText = 1024
)

// ErrFrame is the cause of every malformed frame.
var ErrFrame = errors.New("malformed port-forward frame")

// Frame is one decoded frame. Port is set for Ready, Open and AssocOpen;
// Credit for Window; Payload holds data, a datagram or a text.
type Frame struct {
	Type    Type
	ID      uint32
	Port    uint16
	Credit  uint32
	Payload []byte
}

// Append encodes f after b.
func (f Frame) Append(b []byte) []byte { return append(f.appendHead(b), f.body()...) }

// maxHead is the longest fixed part of a frame: the header and a credit.
const maxHead = HeaderSize + 4

// appendHead encodes f's fixed part after b: the header, then the port or
// the credit of the types that have one.
func (f Frame) appendHead(b []byte) []byte {
	b = append(b, byte(f.Type))
	b = binary.BigEndian.AppendUint32(b, f.ID)
	switch f.Type {
	case TypeReady, TypeOpen, TypeAssocOpen:
		b = binary.BigEndian.AppendUint16(b, f.Port)
	case TypeWindow:
		b = binary.BigEndian.AppendUint32(b, f.Credit)
	}
	return b
}

// body is what follows the fixed part: the payload (none for Window).
func (f Frame) body() []byte {
	if f.Type == TypeWindow {
		return nil
	}
	return f.Payload
}

// Parse decodes one frame. Payload aliases b.
func Parse(b []byte) (Frame, error) {
	if len(b) < HeaderSize {
		return Frame{}, fmt.Errorf("%w: %d bytes, want at least %d", ErrFrame, len(b), HeaderSize)
	}
	if len(b) > MaxFrame {
		return Frame{}, fmt.Errorf("%w: %d bytes, more than %d", ErrFrame, len(b), MaxFrame)
	}
	f := Frame{Type: Type(b[0]), ID: binary.BigEndian.Uint32(b[1:5])}
	p := b[HeaderSize:]
	bad := func(why string) (Frame, error) {
		return Frame{}, fmt.Errorf("%w: type 0x%02x id %d: %s", ErrFrame, byte(f.Type), f.ID, why)
	}
	switch {
	case f.Type == TypeReady && f.ID != 0:
		return bad("ready has id 0")
	case f.Type != TypeReady && f.Type != TypeError && f.ID == 0:
		return bad("id 0 is only for ready and session errors")
	}
	switch f.Type {
	case TypeReady, TypeOpen, TypeAssocOpen:
		if len(p) < 2 || (f.Type != TypeOpen && len(p) != 2) {
			return bad("bad port field")
		}
		if f.Port = binary.BigEndian.Uint16(p); f.Port == 0 {
			return bad("port 0")
		}
		p = p[2:]
	case TypeWindow:
		if len(p) != 4 {
			return bad("window payload must be 4 bytes")
		}
		if f.Credit = binary.BigEndian.Uint32(p); f.Credit == 0 || f.Credit > Window {
			return bad("window credit must be 1..Window")
		}
		return f, nil
	case TypeData:
		if len(p) == 0 || len(p) > MaxData {
			return bad("data payload must be 1..MaxData bytes")
		}
	case TypeCloseWrite:
		if len(p) != 0 {
			return bad("close-write carries no payload")
		}
	case TypeReset, TypeError, TypeAssocClose:
		if len(p) > maxText {
			return bad("text longer than 1024 bytes")
		}
	case TypeDatagram:
	default:
		return bad("unknown type")
	}
	if len(p) > 0 {
		f.Payload = p
	}
	return f, nil
}

// ReadFrame reads one whole WebSocket message from r as a frame, reading
// no more than MaxFrame+1 bytes: a longer message is refused unread.
func ReadFrame(r io.Reader, buf []byte) (Frame, []byte, error) {
	if cap(buf) < MaxFrame+1 {
		buf = make([]byte, MaxFrame+1)
	}
	buf = buf[:MaxFrame+1]
	n, err := io.ReadFull(r, buf)
	switch {
	case err == nil:
		return Frame{}, buf, fmt.Errorf("%w: message longer than %d bytes", ErrFrame, MaxFrame)
	case err != io.ErrUnexpectedEOF && err != io.EOF:
		return Frame{}, buf, err
	}
	f, err := Parse(buf[:n])
	return f, buf, err
}

// text clips a reason or error to what a frame may carry.
func text(s string) []byte {
	if len(s) > maxText {
		s = s[:maxText]
	}
	return []byte(s)
}
