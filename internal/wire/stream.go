// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"errors"
	"fmt"
	"io"
)

// ErrNotBinary is a message other than binary where a byte stream is
// carried in binary messages (a port-forward tunnel's SPDY session).
var ErrNotBinary = errors.New("websocket stream carries binary messages only")

// BinaryStream is a Conn's binary messages read as the one byte stream
// they carry: a peer may cut it anywhere between messages (client-go
// writes a SPDY frame's header and payload as separate messages). A
// message of another type ends it with ErrNotBinary. Its reader's alone.
type BinaryStream struct {
	c   *Conn
	msg io.Reader // the current message; nil between messages
}

// BinaryStream returns c's binary messages as one byte stream.
func (c *Conn) BinaryStream() *BinaryStream { return &BinaryStream{c: c} }

func (s *BinaryStream) Read(p []byte) (int, error) {
	for {
		if s.msg != nil {
			n, err := s.msg.Read(p)
			if err != io.EOF {
				return n, err
			}
			s.msg = nil
			if n > 0 {
				return n, nil
			}
		}
		mt, r, err := s.c.NextReader()
		if err != nil {
			return 0, err
		}
		if mt != OpBinary {
			return 0, fmt.Errorf("%w: got a message of type %d", ErrNotBinary, mt)
		}
		s.msg = r
	}
}
