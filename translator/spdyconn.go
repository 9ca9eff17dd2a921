// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
)

// spdyConn is the client end of a SPDY/3.1 connection to a runtime's
// streaming server, cut down to what remotecommand translation needs, on
// internal/spdy's framing (why not spdystream: that package's doc). One
// goroutine reads frames and writes their payload straight into the
// caller's buffer; data frames are written from the caller's buffer with
// the 8-byte header in front (no copy, no allocation). The peer is
// unchanged k8s.io/cri-streaming or containerd: they speak full SPDY/3.1
// and accept all of this.
type spdyConn struct {
	conn net.Conn

	// The read side, the session's runtime reader's alone: frames read
	// through the stage (internal/wire/stage.go).
	src wire.StagedReader
	fr  *spdy.Reader

	// The write side: one frame at a time on the wire, each bounded by
	// writeTimeout (0: none), so a runtime that stops reading ends the
	// session instead of holding wmu for ever.
	wmu          sync.Mutex
	writeTimeout time.Duration
	nextID       uint32 // client streams are odd
	headerSent   bool   // the zlib stream header went out with the first block
	pingID       uint32
	ctl          [32]byte // scratch for control frames, under wmu
	// pong is the runtime's last unanswered PING (its ID, with bit 32
	// set), left by the reader when a write holds wmu: the reader never
	// waits on a write (the pattern of kubernetes#124571), and whoever
	// holds wmu answers it before letting go (unlock).
	pong atomic.Uint64
	rbuf [4]byte // scratch of the single reader; a field so nothing escapes per frame
}

func newSPDYConn(c net.Conn, writeTimeout time.Duration) *spdyConn {
	sc := &spdyConn{conn: c, nextID: 1, src: wire.StagedReader{R: c}, writeTimeout: writeTimeout}
	sc.fr = spdy.NewReader(&sc.src)
	return sc
}

// synStream opens a stream with one header pair and returns its ID. The
// runtime replies asynchronously; nothing waits here, so all streams of a
// session go out in one round trip.
func (c *spdyConn) synStream(name, value string) (uint32, error) {
	c.wmu.Lock()
	defer c.unlock()
	id := c.nextID
	c.nextID += 2
	var fixed [spdy.SynStreamFixed]byte // the stream ID; associated stream, priority and slot 0
	binary.BigEndian.PutUint32(fixed[:], id)
	b := spdy.AppendHeaders(make([]byte, 0, 64+len(name)+len(value)), spdy.TypeSynStream, fixed[:], !c.headerSent, name, value)
	c.headerSent = true
	return id, c.write(b)
}

// write writes one frame, under wmu, within the write timeout.
func (c *spdyConn) write(b []byte) error {
	if c.writeTimeout > 0 {
		_ = c.conn.SetWriteDeadline(time.Now().Add(c.writeTimeout)) // fails only once closed; the write then says why
	}
	_, err := c.conn.Write(b)
	return err
}

// unlock answers the PING the reader left, if any, then lets wmu go;
// one left meanwhile is answered by whoever takes wmu next, the reader
// itself if no one holds it.
func (c *spdyConn) unlock() {
	for {
		if p := c.pong.Swap(0); p != 0 {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(p))
			_ = c.write(append(spdy.AppendControl(c.ctl[:0], spdy.TypePing, 0, 4), b[:]...)) // a failure shows on the next write or read
		}
		c.wmu.Unlock()
		if c.pong.Load() == 0 || !c.wmu.TryLock() {
			return
		}
	}
}

// writeData sends buf[spdy.HeaderLen:] on stream id, writing the frame
// header into buf's first 8 bytes. fin half-closes the stream.
func (c *spdyConn) writeData(id uint32, buf []byte, fin bool) error {
	n := len(buf) - spdy.HeaderLen
	if n < 0 || n > spdy.MaxData {
		return fmt.Errorf("SPDY data frame of %d bytes", n)
	}
	spdy.PutDataHeader(buf, id, n, fin)
	c.wmu.Lock()
	defer c.unlock()
	return c.write(buf)
}

// finish half-closes stream id (the runtime's reader sees EOF).
func (c *spdyConn) finish(id uint32) error {
	var b [spdy.HeaderLen]byte
	return c.writeData(id, b[:], true)
}

// ping keeps the connection to the runtime alive through idle periods.
func (c *spdyConn) ping() error {
	c.wmu.Lock()
	defer c.unlock()
	c.pingID += 2
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], c.pingID-1) // client pings are odd
	return c.write(append(spdy.AppendControl(c.ctl[:0], spdy.TypePing, 0, len(p)), p[:]...))
}

// answerPing leaves the runtime's PING id for the holder of wmu, or
// answers it at once when no one holds it; it never waits.
func (c *spdyConn) answerPing(id uint32) {
	c.pong.Store(uint64(id) | 1<<32)
	if c.wmu.TryLock() {
		c.unlock()
	}
}

// frame is one frame header as read; for data frames the payload is still
// on the wire, for readPayload; what is left of it the next read skips.
type frame struct {
	control bool
	typ     uint16
	id      uint32 // data frames: the stream; control frames: filled for the types we use
	flags   byte
	length  int
}

var errGoAway = errors.New("container runtime ended the SPDY session")

// next reads the next frame the caller must act on. Control frames that
// need an answer or carry nothing for the caller (PING, SETTINGS,
// WINDOW_UPDATE, HEADERS) are handled here.
func (c *spdyConn) next() (frame, error) {
	for {
		h, err := c.fr.Next()
		if err != nil {
			return frame{}, err
		}
		f := frame{flags: h.Flags(), length: h.Length()}
		if !h.Control() {
			f.id = h.StreamID()
			return f, nil
		}
		f.control = true
		f.typ = h.Type()
		switch f.typ {
		case spdy.TypeSynReply, spdy.TypeRstStream:
			if f.length < 4 {
				return f, fmt.Errorf("short SPDY control frame type %d", f.typ)
			}
			f.id = c.fr.Stream()
			// The rest (the reply's compressed headers, the reset's
			// status) is of no use to a client that never reads headers,
			// so the decompressor's state need not be kept either.
			if err := c.fr.Skip(); err != nil {
				return f, err
			}
			return f, nil
		case spdy.TypeGoAway:
			_ = c.fr.Skip() // the session ends either way: errGoAway says why
			return f, errGoAway
		case spdy.TypePing:
			if f.length != 4 {
				return f, fmt.Errorf("SPDY ping of %d bytes", f.length)
			}
			p := c.rbuf[:]
			if err := c.fr.ReadFull(p); err != nil {
				return f, err
			}
			if id := binary.BigEndian.Uint32(p); id%2 == 0 { // the runtime's ping: answer it
				c.answerPing(id)
			}
		}
		// SETTINGS, WINDOW_UPDATE (spdystream does no flow control),
		// HEADERS: the next frame's read skips them.
	}
}

// nextDataStaged takes the next frame's header when it is already staged
// (it came with an earlier read, so looking costs no system call) and is a
// data frame on stream id, without FIN, of 1 to room bytes; its payload is
// then the caller's to read. Otherwise it takes nothing.
func (c *spdyConn) nextDataStaged(id uint32, room int) (int, bool) {
	h, ok := c.fr.Buffered()
	if !ok || h.Control() || h.StreamID() != id || h.Fin() {
		return 0, false
	}
	n := h.Length()
	if n == 0 || n > room {
		return 0, false
	}
	_, _ = c.fr.Next() // staged: it cannot fail
	return n, true
}

// readPayload fills p with the current data frame's payload. The bytes
// between len(p) and cap(p) are scratch: a large payload is read straight
// into p and the read runs on into that room, so the next frame's header
// (spdystream writes it right behind the payload) comes in the same read
// syscall instead of one of its own. Callers pass a full slice expression
// when the room behind p is not theirs to spoil.
func (c *spdyConn) readPayload(p []byte) error { return c.fr.ReadFull(p) }

// discard skips the rest of the current frame.
func (c *spdyConn) discard() error { return c.fr.Skip() }

func (c *spdyConn) Close() error { return c.conn.Close() }
