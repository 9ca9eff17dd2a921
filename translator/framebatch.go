// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"fmt"
	"net"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
)

// frameBatch gathers one direction's SPDY frames in the tunnel until a
// flush writes them on in one write: to the client as one WebSocket
// message (ws, with buf[:head] kept for the message's frame header,
// wire.Conn.WriteInPlace), or to the runtime (rt). Its copier's alone.
type frameBatch struct {
	buf   []byte
	head  int // wire.Headroom towards the client, 0 towards the runtime
	fill  int // bytes gathered, in buf[head:]
	whole int // of them, the frames gathered whole (the up copy's)
	total uint64
	ws    *wire.Conn
	rt    net.Conn
}

func (b *frameBatch) flush() error {
	if b.fill == 0 {
		return nil
	}
	if b.ws != nil {
		if err := b.ws.WriteInPlace(b.buf[:b.head+b.fill]); err != nil {
			return err
		}
	} else if _, err := b.rt.Write(b.buf[:b.fill]); err != nil {
		return fmt.Errorf("writing tunnel data to runtime: %w", err)
	}
	b.total += uint64(b.fill)
	b.fill, b.whole = 0, 0
	return nil
}

// flushUnlessMore flushes the batch unless fr already holds the next
// frame's header: frames already read go out together, none waits for
// more to come.
func (b *frameBatch) flushUnlessMore(fr *spdy.Reader) error {
	if _, more := fr.Buffered(); b.fill == 0 || more {
		return nil
	}
	return b.flush()
}

// room is the batch's free room, after a flush when it has none.
func (b *frameBatch) room() ([]byte, error) {
	if b.head+b.fill == len(b.buf) {
		if err := b.flush(); err != nil {
			return nil, err
		}
	}
	return b.buf[b.head+b.fill:], nil
}

// put adds out to the batch.
func (b *frameBatch) put(out []byte) error {
	for len(out) > 0 {
		room, err := b.room()
		if err != nil {
			return err
		}
		k := copy(room, out)
		b.fill += k
		out = out[k:]
	}
	return nil
}

// copyPayload adds the rest of fr's frame to the batch: rerr is why the
// side it reads ended inside it, werr why the side it writes did.
func (b *frameBatch) copyPayload(fr *spdy.Reader) (rerr, werr error) {
	for fr.Remaining() > 0 {
		room, err := b.room()
		if err != nil {
			return nil, err
		}
		k, err := fr.Read(room)
		b.fill += k
		if err != nil {
			return err, nil
		}
	}
	return nil, nil
}

// clientFrame adds one of the client's frames, h its header and its
// payload next in fr: rerr is why the client's side ended inside it, werr
// why the runtime's did. A frame with a header block (SYN_STREAM,
// SYN_REPLY, HEADERS) is read whole and shown to pf before it goes on, so
// pf knows a stream before the runtime can answer on it; one larger than
// maxHeaderFrame (or the batch) goes on as it comes, and pf loses the
// header stream with it.
func (b *frameBatch) clientFrame(fr *spdy.Reader, h spdy.Header, pf *pfResets) (rerr, werr error) {
	n := spdy.HeaderLen + h.Length()
	switch {
	case !h.Control():
	case h.Type() != spdy.TypeSynStream && h.Type() != spdy.TypeSynReply && h.Type() != spdy.TypeHeaders:
	case n > maxHeaderFrame || n > len(b.buf)-b.head:
		pf.clientFrame(nil)
	default:
		if b.head+b.fill+n > len(b.buf) {
			if err := b.flush(); err != nil {
				return nil, err
			}
		}
		frame := b.buf[b.head+b.fill : b.head+b.fill+n]
		copy(frame, h[:])
		if err := fr.ReadFull(frame[spdy.HeaderLen:]); err != nil {
			return err, nil
		}
		b.fill += n
		pf.clientFrame(frame)
		return nil, nil
	}
	if err := b.put(h[:]); err != nil {
		return nil, err
	}
	return b.copyPayload(fr)
}
