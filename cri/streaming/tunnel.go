// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
)

// Limits of one tunnel's reader.
const (
	// maxStreams bounds the streams open at once (two per forwarded
	// connection); more are refused with RST_STREAM.
	maxStreams = 1000
	// maxControlFrame bounds the control frames the tunnel reads whole
	// (SYN_STREAM with its compressed headers, RST_STREAM, PING, GOAWAY).
	maxControlFrame = spdy.MaxHeaderBlock + spdy.SynStreamFixed
)

var errGoAway = errors.New("client ended the SPDY session")

// errTunnelProtocol marks a client that broke the tunnel's SPDY framing.
var errTunnelProtocol = errors.New("port-forward tunnel")

func tunnelErrf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errTunnelProtocol}, a...)...)
}

// pfTunnel is one port-forward session's SPDY side.
type pfTunnel struct {
	s       *backend
	wc      *wire.Conn
	sandbox string
	logger  klog.Logger
	ctx     context.Context

	// The reader's alone: the client's frames, read through the one SPDY
	// frame reader (internal/spdy) over its messages as one byte stream.
	in     *spdy.Reader
	dec    spdy.HeaderDecoder
	lastID uint32 // the highest stream ID the client opened
	ctl    []byte // control frame payloads, grown to the largest seen (≤ maxControlFrame)

	// wmu orders frames carrying header blocks: the reply header stream is
	// one zlib stream, and its first block must go first.
	wmu          sync.Mutex
	replyStarted bool

	mu      sync.Mutex
	streams map[uint32]*pfStream
	ended   bool // the session ends: no new streams

	pairs    pairs
	forwards sync.WaitGroup
}

func newTunnel(ctx context.Context, s *backend, wc *wire.Conn, sandbox string, logger klog.Logger) *pfTunnel {
	t := &pfTunnel{s: s, wc: wc, in: spdy.NewReader(&wire.StagedReader{R: wc.BinaryStream()}),
		sandbox: sandbox, logger: logger, ctx: ctx, streams: map[uint32]*pfStream{}}
	t.pairs = pairs{pending: map[string]*streamPair{}, timeout: s.config.StreamCreationTimeout, drop: t.drop}
	return t
}

// read reads the client's frames until it ends the session, vanishes or
// breaks the protocol.
func (t *pfTunnel) read() error {
	for {
		h, err := t.in.Next()
		if err != nil {
			return err
		}
		n := h.Length()
		if !h.Control() {
			if err := t.data(h.StreamID(), n, h.Fin()); err != nil {
				return err
			}
			continue
		}
		if v := h.Version(); v != spdy.Version {
			return tunnelErrf("SPDY version %d", v)
		}
		typ := h.Type()
		switch typ {
		case spdy.TypeSynStream, spdy.TypeRstStream, spdy.TypePing, spdy.TypeGoAway:
		default: // SETTINGS, WINDOW_UPDATE (spdystream does no flow control), HEADERS: the next Next skips them
			continue
		}
		if n > maxControlFrame {
			return tunnelErrf("SPDY control frame of %d bytes", n)
		}
		if cap(t.ctl) < n {
			t.ctl = make([]byte, n)
		}
		p := t.ctl[:n]
		if err := t.in.ReadFull(p); err != nil {
			return err
		}
		switch typ {
		case spdy.TypeSynStream:
			err = t.open(p, h.Flags())
		case spdy.TypeRstStream:
			if n != 8 {
				return tunnelErrf("RST_STREAM of %d bytes", n)
			}
			t.peerReset(spdy.StreamID(p))
		case spdy.TypePing:
			if n != 4 {
				return tunnelErrf("PING of %d bytes", n)
			}
			if binary.BigEndian.Uint32(p)%2 == 1 { // the client's: echo it
				err = t.wc.WriteFrame(append(spdy.AppendControl(nil, spdy.TypePing, 0, 4), p...))
			}
		case spdy.TypeGoAway:
			return errGoAway
		}
		if err != nil {
			return err
		}
	}
}

// open answers a SYN_STREAM: a reply, or a reset when its headers are not
// port-forward's; a complete pair starts forwarding.
func (t *pfTunnel) open(p []byte, flags byte) error {
	if len(p) < spdy.SynStreamFixed {
		return tunnelErrf("SYN_STREAM of %d bytes", len(p))
	}
	id := spdy.StreamID(p)
	if id%2 == 0 || id <= t.lastID {
		return tunnelErrf("stream ID %d after %d", id, t.lastID)
	}
	t.lastID = id
	h, err := t.dec.Decode(p[spdy.SynStreamFixed:])
	if err != nil {
		return err // the header stream is broken: nothing after it can be read
	}
	if err := checkStream(h); err != nil {
		t.logger.V(2).Info("Refusing port-forward stream", "stream", id, "err", err)
		return writeReset(t.wc, id, spdy.StatusRefusedStream)
	}
	st := &pfStream{wc: t.wc, id: id, headers: h, inEOF: flags&spdy.FlagFin != 0,
		// Nothing reads an error stream (client-go half-closes it at
		// once): what a client sends on one is dropped, not held.
		unread: h.Get(portforward.StreamType) == portforward.StreamTypeError}
	st.cond.L = &st.mu
	t.mu.Lock()
	refused := t.ended || len(t.streams) >= maxStreams
	if !refused {
		t.streams[id] = st
	}
	t.mu.Unlock()
	if refused {
		return writeReset(t.wc, id, spdy.StatusRefusedStream)
	}
	if err := t.reply(id); err != nil {
		return err
	}
	if pair := t.pairs.add(st); pair != nil {
		t.forwards.Go(func() {
			defer t.remove(pair.data, pair.errs)
			t.s.forward(t.ctx, t.sandbox, t.logger, pair)
		})
	}
	return nil
}

// data moves one data frame's payload into its stream's inbox; a frame for
// a stream that is gone (reset, or its forward ended) is read and dropped.
func (t *pfTunnel) data(id uint32, n int, fin bool) error {
	t.mu.Lock()
	st := t.streams[id]
	t.mu.Unlock()
	if n > 0 {
		bp := wire.GetBuf(maxDataChunk)
		defer wire.PutBuf(bp)
		for n > 0 {
			k := min(n, maxDataChunk)
			if err := t.in.ReadFull((*bp)[:k]); err != nil {
				return err
			}
			n -= k
			if st != nil && st.push((*bp)[:k], t.stallLimit()) {
				t.logger.V(2).Info("Resetting a port-forward stream the runtime stopped reading", "stream", id, "after", t.stallLimit())
				if err := st.Reset(); err != nil {
					return err
				}
				t.remove(st)
				st = nil
			}
		}
	}
	if fin && st != nil {
		st.finRead()
	}
	return nil
}

func (t *pfTunnel) stallLimit() time.Duration {
	return (t.s.limits.PingPeriod + t.s.limits.PongTimeout) / 2
}

func (t *pfTunnel) reply(id uint32) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	frame := spdy.AppendHeaders(nil, spdy.TypeSynReply, binary.BigEndian.AppendUint32(nil, id), !t.replyStarted)
	t.replyStarted = true
	return t.wc.WriteFrame(frame)
}

func (t *pfTunnel) peerReset(id uint32) {
	t.mu.Lock()
	st := t.streams[id]
	t.mu.Unlock()
	if st != nil {
		st.mu.Lock()
		st.clientReset = true
		st.mu.Unlock()
		st.end()
	}
}

// remove forgets streams whose forward or pairing ended; data the client
// still sends them is dropped.
func (t *pfTunnel) remove(sts ...*pfStream) {
	t.mu.Lock()
	for _, st := range sts {
		if st != nil && t.streams[st.id] == st {
			delete(t.streams, st.id)
		}
	}
	t.mu.Unlock()
	for _, st := range sts {
		if st != nil {
			st.end()
		}
	}
}

// drop resets a stream the client opened in vain (its pair never came, or
// its request already had one of its type) and forgets it.
func (t *pfTunnel) drop(st *pfStream) {
	_ = st.Reset()
	t.remove(st)
}

// resetAll ends every stream: the session is over.
func (t *pfTunnel) resetAll() {
	t.mu.Lock()
	t.ended = true
	sts := make([]*pfStream, 0, len(t.streams))
	for _, st := range t.streams {
		sts = append(sts, st)
	}
	t.mu.Unlock()
	for _, st := range sts {
		st.end()
	}
}
