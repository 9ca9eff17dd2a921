package translator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/moby/spdystream/spdy"

	"github.com/kubestream/kubestream/internal/wire"
)

// spdyConn is the client end of a SPDY/3.1 connection to a runtime's
// streaming server, cut down to what remotecommand translation needs.
//
// Written by hand because it must be cheaper than spdystream, the library
// client-go and upstream's translator use: spdystream runs ~11 goroutines
// and a zlib compressor (~900 KiB) per connection, allocates every data
// frame it reads and hands it over a channel. Here one goroutine reads
// frames and writes their payload straight into the caller's buffer, data
// frames are written from the caller's buffer with the 8-byte header in
// front (no copy, no allocation), and header blocks are sent as stored
// (uncompressed) deflate blocks, so no compressor exists at all. The peer is
// unchanged k8s.io/cri-streaming or containerd: they speak full SPDY/3.1 and
// accept all of this.
type spdyConn struct {
	conn net.Conn

	rd wire.Stage // the read side (internal/wire/stage.go), the session's runtime reader's alone

	wmu        sync.Mutex // one frame at a time on the wire
	nextID     uint32     // client streams are odd
	headerSent bool       // the zlib stream header went out with the first block
	pingID     uint32
	ctl        [32]byte            // scratch for control frames, under wmu
	rbuf       [spdyHeaderLen]byte // scratch of the single reader; a field so nothing escapes per frame
}

// zlibPrefix is the zlib stream header (CMF, FLG with FDICT, and the
// Adler-32 of SPDY/3's header dictionary) that must open every header
// stream. It is taken from spdystream's own framer so the dictionary lives
// in one place.
var zlibPrefix = func() [6]byte {
	var buf bytes.Buffer
	f, err := spdy.NewFramer(&buf, &buf)
	if err != nil {
		panic(err)
	}
	if err := f.WriteFrame(&spdy.SynStreamFrame{StreamId: 1, Headers: http.Header{"A": {"b"}}}); err != nil {
		panic(err)
	}
	var p [6]byte
	copy(p[:], buf.Bytes()[18:24]) // after the 8-byte frame header and 10 fixed bytes
	if p[0]&0x0f != 8 || p[1]&0x20 == 0 {
		panic("unexpected zlib header from spdystream's framer")
	}
	return p
}()

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
	// The uncompressed header block: count, then length-prefixed name and
	// value (SPDY/3 uses 32-bit lengths).
	blockLen := 4 + 4 + len(name) + 4 + len(value)
	var b bytes.Buffer
	var frameLen = 10 + 5 + blockLen + 5
	if !c.headerSent {
		frameLen += len(zlibPrefix)
	}
	b.Grow(spdyHeaderLen + frameLen)
	b.Write([]byte{spdyControlBit, spdyVersion, 0, spdyTypeSynStrm, 0, byte(frameLen >> 16), byte(frameLen >> 8), byte(frameLen)})
	_ = binary.Write(&b, binary.BigEndian, id)
	b.Write([]byte{0, 0, 0, 0, 0, 0}) // associated stream, priority, slot
	if !c.headerSent {
		b.Write(zlibPrefix[:])
		c.headerSent = true
	}
	// A stored deflate block: BFINAL=0, BTYPE=00, then LEN and ^LEN.
	b.Write([]byte{0, byte(blockLen), byte(blockLen >> 8), ^byte(blockLen), ^byte(blockLen >> 8)})
	_ = binary.Write(&b, binary.BigEndian, uint32(1))
	_ = binary.Write(&b, binary.BigEndian, uint32(len(name)))
	b.WriteString(name)
	_ = binary.Write(&b, binary.BigEndian, uint32(len(value)))
	b.WriteString(value)
	// An empty stored block, as a zlib sync flush ends with: Go's inflater
	// (and zlib's) looks for the next block header as soon as a block ends,
	// and must find it inside this frame, not in the next one.
	b.Write([]byte{0, 0, 0, 0xff, 0xff})
	_, err := c.conn.Write(b.Bytes())
	return id, err
}

// writeData sends buf[spdyHeaderLen:] on stream id, writing the frame
// header into buf's first 8 bytes. fin half-closes the stream.
func (c *spdyConn) writeData(id uint32, buf []byte, fin bool) error {
	n := len(buf) - spdyHeaderLen
	if n < 0 || n > spdyMaxData {
		return fmt.Errorf("SPDY data frame of %d bytes", n)
	}
	binary.BigEndian.PutUint32(buf[0:4], id&0x7fffffff) // a data frame: the control bit clear
	buf[4] = 0
	if fin {
		buf[4] = spdyFlagFin
	}
	buf[5], buf[6], buf[7] = byte(n>>16), byte(n>>8), byte(n)
	c.wmu.Lock()
	_, err := c.conn.Write(buf)
	c.wmu.Unlock()
	return err
}

// finish half-closes stream id (the runtime's reader sees EOF).
func (c *spdyConn) finish(id uint32) error {
	var b [spdyHeaderLen]byte
	return c.writeData(id, b[:], true)
}

func (c *spdyConn) writeControl(typ byte, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := len(payload)
	b := c.ctl[:spdyHeaderLen+n]
	copy(b, []byte{spdyControlBit, spdyVersion, 0, typ, 0, byte(n >> 16), byte(n >> 8), byte(n)})
	copy(b[spdyHeaderLen:], payload)
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
	return c.writeControl(spdyTypePing, p[:])
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
		f := frame{flags: h[4], length: spdyLength(h)}
		if h[0]&spdyControlBit == 0 {
			f.id = spdyStreamID(h)
			return f, nil
		}
		f.control = true
		f.typ = spdyControlType(h)
		switch f.typ {
		case spdyTypeSynReply, spdyTypeRst:
			if f.length < 4 {
				return f, fmt.Errorf("short SPDY control frame type %d", f.typ)
			}
			if err := c.readFull(h[:4]); err != nil {
				return f, err
			}
			f.id = spdyStreamID(h)
			// The rest (the reply's compressed headers, the reset's
			// status) is of no use to a client that never reads headers,
			// so the decompressor's state need not be kept either.
			if err := c.discard(f.length - 4); err != nil {
				return f, err
			}
			return f, nil
		case spdyTypeGoAway:
			_ = c.discard(f.length)
			return f, errGoAway
		case spdyTypePing:
			if f.length != 4 {
				return f, fmt.Errorf("SPDY ping of %d bytes", f.length)
			}
			p := h[:4]
			if err := c.readFull(p); err != nil {
				return f, err
			}
			if binary.BigEndian.Uint32(p)%2 == 0 { // the runtime's ping: answer it
				if err := c.writeControl(spdyTypePing, p); err != nil {
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
