package translator

import "encoding/binary"

// The SPDY/3.1 frame layout (draft-mbelshe-httpbis-spdy-00 §2.2), named once
// for the runtime leg's client (spdyconn.go), the tunnel's frame follower
// (below) and the relay (spdyrelay.go). Every frame has an 8-byte header:
// a control bit, then version and type (control) or a stream ID (data);
// one byte of flags; a 24-bit payload length.
const (
	spdyControlBit   = 0x80
	spdyVersion      = 3
	spdyTypeSynStrm  = 1
	spdyTypeSynReply = 2
	spdyTypeRst      = 3
	spdyTypePing     = 6
	spdyTypeGoAway   = 7
	spdyTypeHeaders  = 8
	spdyFlagFin      = 0x01
	spdyHeaderLen    = 8
	spdyMaxData      = 1<<24 - 1
)

// spdyLength is the payload length in a frame header.
func spdyLength(h []byte) int { return int(h[5])<<16 | int(h[6])<<8 | int(h[7]) }

// spdyStreamID is the 31-bit stream ID at the start of b: a data frame's
// header, or a SYN_REPLY's or RST_STREAM's payload.
func spdyStreamID(b []byte) uint32 { return binary.BigEndian.Uint32(b) & 0x7fffffff }

// spdyControlType is a control frame's type.
func spdyControlType(h []byte) uint16 { return binary.BigEndian.Uint16(h[2:4]) }

// spdyBoundary follows SPDY frame boundaries in a byte stream. Every SPDY
// frame, control or data, has its 24-bit length in bytes 5-7 of its 8-byte
// header.
type spdyBoundary struct {
	hdr  [spdyHeaderLen]byte
	nhdr int // header bytes of the current frame seen so far
	rem  int // payload bytes of the current frame still to come
}

func (b *spdyBoundary) feed(p []byte) {
	for len(p) > 0 {
		if b.rem > 0 {
			k := min(b.rem, len(p))
			b.rem -= k
			p = p[k:]
			continue
		}
		k := copy(b.hdr[b.nhdr:], p)
		b.nhdr += k
		p = p[k:]
		if b.nhdr == spdyHeaderLen {
			b.rem = spdyLength(b.hdr[:])
			b.nhdr = 0
		}
	}
}

func (b *spdyBoundary) atBoundary() bool { return b.nhdr == 0 && b.rem == 0 }
