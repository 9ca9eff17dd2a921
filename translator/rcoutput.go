// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"errors"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
)

// pumpOutputs reads the runtime connection until the runtime has closed
// the error, stdout and stderr streams (or the connection), writing output
// to the client as it comes, then forwards the runtime's status. One reader
// keeps the runtime's frame order: every output byte is on the wire before
// the status, and the client stops reading output once it has the status.
func (s *rcSession) pumpOutputs() *metav1.Status {
	for len(s.open) > 0 {
		f, err := s.rt.next()
		if err == nil {
			err = s.forward(f)
		}
		if err != nil {
			if !errors.Is(err, errGoAway) && !s.wc.Closed() {
				s.logger.V(3).Info("Runtime connection ended", "err", err)
			}
			break
		}
	}
	st, frame := parseRuntimeStatus(s.status)
	if !s.wc.CloseWith(frame, websocket.CloseNormalClosure, "") {
		return nil // the client side ended first; it has had its answer
	}
	return st
}

// forward acts on one frame from the runtime.
func (s *rcSession) forward(f frame) error {
	if f.control { // a reset: the runtime is done with that stream
		delete(s.open, f.id)
		return nil
	}
	var err error
	switch f.id {
	case s.stdoutID:
		err = s.output(ChanStdout, f.id, f.length)
	case s.stderrID:
		err = s.output(ChanStderr, f.id, f.length)
	case s.errID:
		err = s.readStatus(f.length)
	default:
		err = s.rt.discard()
	}
	if f.flags&spdy.FlagFin != 0 {
		delete(s.open, f.id)
	}
	return err
}

// output copies a data frame's payload to the client on channel ch, read
// straight into a v5 frame behind the channel byte. Once the client cannot
// take output the payload is still read, so the runtime never blocks on us.
//
// Frames of the same stream that have already arrived behind this one go
// into the same message, up to BufferSize: a runtime cuts output as the
// process wrote it (containerd: one SPDY frame per read of the container's
// pipe, often a few KiB), and each message is a TLS record and a write
// system call on the client leg, the dearest per-frame cost a node pays.
// Only frames whose header is already staged are joined, so no output waits
// for more to come.
func (s *rcSession) output(ch byte, id uint32, length int) error {
	if length == 0 {
		return nil
	}
	// Room in front takes the message's frame header (WriteInPlace); the
	// capacity wire.GetBuf leaves behind the payload lets the runtime
	// reader take the next frame's header in the same read.
	bp := wire.GetBuf(wire.Headroom + 1 + s.cfg.BufferSize)
	defer wire.PutBuf(bp)
	msg := *bp
	buf := msg[wire.Headroom:]
	buf[0] = ch
	for rem := length; rem > 0; {
		n := min(rem, s.cfg.BufferSize)
		if err := s.rt.readPayload(buf[1 : 1+n]); err != nil {
			return err
		}
		rem -= n
		for rem == 0 && n < s.cfg.BufferSize {
			more, ok := s.rt.nextDataStaged(id, s.cfg.BufferSize-n)
			if !ok {
				break
			}
			if err := s.rt.readPayload(buf[1+n : 1+n+more]); err != nil {
				return err
			}
			n += more
		}
		if !s.writing {
			continue
		}
		if werr := s.wc.WriteInPlace(msg[:wire.Headroom+1+n]); werr != nil {
			s.writing = false
			if !errors.Is(werr, wire.ErrSessionClosed) {
				// The client cannot take output: the session is over.
				s.logger.V(3).Info("Writing to client failed", "channel", ch, "err", werr)
				s.wc.CloseWith(nil, websocket.CloseGoingAway, "")
				s.rt.Close()
			}
			continue
		}
		s.bytes[ch].Add(uint64(n))
		if s.obs != nil {
			s.obs.Output(ch, buf[1:1+n])
		}
	}
	return nil
}

// readStatus appends error-stream data, keeping at most 64 KiB.
func (s *rcSession) readStatus(n int) error {
	keep := min(n, 64*1024-len(s.status))
	if keep > 0 {
		s.status = append(s.status, make([]byte, keep)...)
		if err := s.rt.readPayload(s.status[len(s.status)-keep : len(s.status) : len(s.status)]); err != nil {
			return err
		}
	}
	return s.rt.discard()
}
