package translator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"

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

	rd wire.Stage // the read side (internal/wire/stage.go), the session's runtime reader's alone

	wmu        sync.Mutex // one frame at a time on the wire
	nextID     uint32     // client streams are odd
	headerSent bool       // the zlib stream header went out with the first block
	pingID     uint32
	ctl        [32]byte             // scratch for control frames, under wmu
	rbuf       [spdy.HeaderLen]byte // scratch of the single reader; a field so nothing escapes per frame
}

func newSPDYConn(c net.Conn) *spdyConn {
	return &spdyConn{conn: c, nextID: 1}
}

// synStream opens a stream with one header pair and returns its ID. The
// runtime replies asynchronously; nothing waits here, so all streams of a
// session go out in one round trip.
func (c *spdyConn) synStream(name, value string) (uint32, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	id := c.nextID
	c.nextID += 2
	var fixed [spdy.SynStreamFixed]byte // the stream ID; associated stream, priority and slot 0
	binary.BigEndian.PutUint32(fixed[:], id)
	b := spdy.AppendHeaders(make([]byte, 0, 64+len(name)+len(value)), spdy.TypeSynStream, fixed[:], !c.headerSent, name, value)
	c.headerSent = true
	_, err := c.conn.Write(b)
	return id, err
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
	_, err := c.conn.Write(buf)
	c.wmu.Unlock()
	return err
}

// finish half-closes stream id (the runtime's reader sees EOF).
func (c *spdyConn) finish(id uint32) error {
	var b [spdy.HeaderLen]byte
	return c.writeData(id, b[:], true)
}

func (c *spdyConn) writeControl(typ byte, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := len(payload)
	b := c.ctl[:spdy.HeaderLen+n]
	copy(b, []byte{spdy.ControlBit, spdy.Version, 0, typ, 0, byte(n >> 16), byte(n >> 8), byte(n)})
	copy(b[spdy.HeaderLen:], payload)
	_, err := c.conn.Write(b)
	return err
}

// ping keeps the connection to the runtime alive through idle periods.
func (c *spdyConn) ping() error {
	c.wmu.Lock()
	c.pingID += 2
	id := c.pingID - 1 // client pings are odd
	c.wmu.Unlock()
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], id)
	return c.writeControl(spdy.TypePing, p[:])
}

// frame is one frame header as read; for data frames the payload is still
// on the wire and must be consumed with readPayload or discard.
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
	h := c.rbuf[:]
	for {
		if err := c.readFull(h); err != nil {
			return frame{}, err
		}
		f := frame{flags: h[4], length: spdy.Length(h)}
		if h[0]&spdy.ControlBit == 0 {
			f.id = spdy.StreamID(h)
			return f, nil
		}
		f.control = true
		f.typ = spdy.ControlType(h)
		switch f.typ {
		case spdy.TypeSynReply, spdy.TypeRstStream:
			if f.length < 4 {
				return f, fmt.Errorf("short SPDY control frame type %d", f.typ)
			}
			if err := c.readFull(h[:4]); err != nil {
				return f, err
			}
			f.id = spdy.StreamID(h)
			// The rest (the reply's compressed headers, the reset's
			// status) is of no use to a client that never reads headers,
			// so the decompressor's state need not be kept either.
			if err := c.discard(f.length - 4); err != nil {
				return f, err
			}
			return f, nil
		case spdy.TypeGoAway:
			_ = c.discard(f.length) // the session ends either way: errGoAway says why
			return f, errGoAway
		case spdy.TypePing:
			if f.length != 4 {
				return f, fmt.Errorf("SPDY ping of %d bytes", f.length)
			}
			p := h[:4]
			if err := c.readFull(p); err != nil {
				return f, err
			}
			if binary.BigEndian.Uint32(p)%2 == 0 { // the runtime's ping: answer it
				if err := c.writeControl(spdy.TypePing, p); err != nil {
					return f, err
				}
			}
		default: // SETTINGS, WINDOW_UPDATE (spdystream does no flow control), HEADERS
			if err := c.discard(f.length); err != nil {
				return f, err
			}
		}
	}
}

// nextDataStaged takes the next frame's header when it is already staged
// (it came with an earlier read, so looking costs no system call) and is a
// data frame on stream id, without FIN, of 1 to room bytes; its payload is
// then the caller's to read. Otherwise it takes nothing.
func (c *spdyConn) nextDataStaged(id uint32, room int) (int, bool) {
	h := c.rd.Staged()
	if len(h) < spdy.HeaderLen || spdy.Control(h) || spdy.StreamID(h) != id || h[4]&spdy.FlagFin != 0 {
		return 0, false
	}
	n := spdy.Length(h)
	if n == 0 || n > room {
		return 0, false
	}
	c.rd.Take(spdy.HeaderLen)
	return n, true
}

// readPayload fills p with the current data frame's payload. The bytes
// between len(p) and cap(p) are scratch: a large payload is read straight
// into p and the read runs on into that room, so the next frame's header
// (spdystream writes it right behind the payload) comes in the same read
// syscall instead of one of its own. Callers pass a full slice expression
// when the room behind p is not theirs to spoil.
func (c *spdyConn) readPayload(p []byte) error { return c.readFull(p) }

// readFull is io.ReadFull through the stage, with p's room up to cap(p)
// open to a run-on read.
func (c *spdyConn) readFull(p []byte) error {
	want, room := len(p), p[:cap(p)]
	for got := 0; got < want; {
		m, err := c.rd.Read(c.conn, room[got:], want-got)
		got += m
		if err != nil && got < want {
			return wire.EOFErr(got, err)
		}
	}
	return nil
}

// discard skips n bytes of the stream.
func (c *spdyConn) discard(n int) error { return c.rd.Skip(c.conn, n) }

func (c *spdyConn) Close() error { return c.conn.Close() }
