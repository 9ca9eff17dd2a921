// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"encoding/json"
	"io"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
)

// readLoop carries the client's messages (wire.V5Reader decides what each
// asks) to the runtime until the client's side ends or breaks v5.
func (s *rcSession) readLoop() error {
	in := wire.NewV5Reader(s.wc, s.stdinID != 0, s.resizeID != 0)
	for {
		m, err := in.Next()
		if err != nil {
			return err
		}
		if err := s.carry(m); err != nil {
			return err
		}
	}
}

// carry hands one client message to the runtime.
func (s *rcSession) carry(m wire.V5Message) error {
	switch {
	case m.Stdin != nil:
		// Room for a SPDY data frame header in front of the payload, so
		// client bytes go to the runtime without a copy, and spare room
		// behind a full message for the reader to read on into the next
		// frame's header (one read syscall per message, not two).
		bp := wire.GetBuf(spdy.HeaderLen + s.cfg.BufferSize + wire.ReadBufSize)
		defer wire.PutBuf(bp)
		return s.copyIn(m.Stdin, s.stdinID, *bp, ChanStdin)
	case m.CloseStdin:
		// A SPDY FIN: the runtime's process sees EOF on stdin.
		if err := s.rt.finish(s.stdinID); err != nil {
			s.logger.V(4).Info("Half-closing runtime stdin", "err", err)
		}
	case m.CloseResize:
		_ = s.rt.finish(s.resizeID) // resizes are advisory: a runtime that cannot take the FIN loses nothing
	default:
		s.resize(m.Sizes, m.ResizeBytes)
	}
	return nil
}

func (s *rcSession) copyIn(r io.Reader, id uint32, buf []byte, ch byte) error {
	for {
		// Whole pieces (wire.ReadStdin): each write is a syscall and a
		// SPDY frame.
		n, end, err := wire.ReadStdin(r, buf[spdy.HeaderLen:])
		if err != nil {
			return err // the message was cut off (or broke): none of it goes on
		}
		if n > 0 {
			if werr := s.rt.writeData(id, buf[:spdy.HeaderLen+n], false); werr != nil {
				// The runtime stopped taking input (the process exited); the
				// status will follow. Keep reading the client.
				s.logger.V(4).Info("Runtime refused input", "channel", ch, "err", werr)
			}
			s.bytes[ch].Add(uint64(n))
			if s.obs != nil {
				s.obs.Input(buf[spdy.HeaderLen : spdy.HeaderLen+n])
			}
		}
		if end {
			return nil
		}
	}
}

// resize hands each size a client's resize message completed to the
// runtime's resize stream.
func (s *rcSession) resize(sizes []wire.TerminalSize, n int) {
	s.bytes[ChanResize].Add(uint64(n))
	for _, size := range sizes {
		if s.obs != nil {
			s.obs.Resize(size.Width, size.Height)
		}
		out, _ := json.Marshal(size)
		frame := append(make([]byte, spdy.HeaderLen, spdy.HeaderLen+len(out)), out...)
		if err := s.rt.writeData(s.resizeID, frame, false); err != nil {
			s.logger.V(4).Info("Runtime refused resize", "err", err)
		}
	}
}
