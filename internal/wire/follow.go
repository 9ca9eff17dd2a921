// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

// Header is a frame header, decoded (RFC 6455 §5.2).
type Header struct {
	Fin    bool
	Op     int
	Masked bool
	Key    [MaskLen]byte // the masking key, when Masked
	// Len is the payload length as the wire has it: a 64-bit length may
	// have its top bit set, which Conn refuses and a Follower reads as the
	// largest length it can follow.
	Len uint64
}

// DecodeHeader decodes a complete header h (HeaderLen(h[1]) bytes): the
// one decoder behind Conn's reads and the Follower.
func DecodeHeader(h []byte) Header {
	d := Header{Fin: h[0]&Fin != 0, Op: int(h[0] & OpcodeMask), Masked: h[1]&MaskBit != 0, Len: PayloadLen(h)}
	if d.Masked {
		copy(d.Key[:], h[len(h)-MaskLen:])
	}
	return d
}

// Follower follows the frames of a WebSocket byte stream as it passes, in
// whatever pieces it is read, without copying or changing it: where each
// frame's header ends and how much payload is left. It is the one state
// machine behind every follower of a spliced session (both directions,
// and a recording's observer); Conn reads the frames of the sessions the
// node terminates itself. A Follower is a plain value: the zero value is
// at the start of a stream, and two are equal when they are in the same
// state.
type Follower struct {
	hdr     [MaxHeader]byte
	hdrLen  int   // header bytes seen of the frame starting now
	left    int64 // payload bytes of the frame in flight still to come
	lastLen int   // the length of the header Next returned last
}

// Next takes the first piece of b up to the stream's next boundary. When
// b's first bytes complete a frame header, header is true and h is that
// header; otherwise payload is the frame in flight's bytes that b holds
// (empty while a header is still incomplete). rest is the remainder of b,
// to pass to Next again.
func (f *Follower) Next(b []byte) (h Header, header bool, payload, rest []byte) {
	if f.left > 0 {
		k := min(f.left, int64(len(b)))
		f.left -= k
		return Header{}, false, b[:k], b[k:]
	}
	for len(b) > 0 {
		f.hdr[f.hdrLen] = b[0]
		f.hdrLen++
		b = b[1:]
		if f.hdrLen < 2 || f.hdrLen < HeaderLen(f.hdr[1]) {
			continue
		}
		h = DecodeHeader(f.hdr[:f.hdrLen])
		f.left, f.lastLen, f.hdrLen = int64(h.Len&(1<<63-1)), f.hdrLen, 0
		return h, true, nil, b
	}
	return Header{}, false, nil, nil
}

// Skip has the follower take the frame in flight's payload as read
// elsewhere: the next byte it is given starts a frame (Conn's reader,
// which reads payloads itself).
func (f *Follower) Skip() { f.left = 0 }

// RawHeader is the header Next returned last as the wire had it, for a
// follower that passes frames on whole; valid until the next header.
func (f *Follower) RawHeader() []byte { return f.hdr[:f.lastLen] }

// Left is how many payload bytes of the frame in flight are still to come
// (0 while its header is incomplete).
func (f *Follower) Left() int64 { return f.left }

// AtBoundary reports whether the next byte starts a frame.
func (f *Follower) AtBoundary() bool { return f.left == 0 && f.hdrLen == 0 }

// Room is how many bytes may be read (at most max) without going past the
// end of the frame in flight: header bytes one at a time, since the
// header's own length shows only as it arrives.
func (f *Follower) Room(max int) int {
	if f.left > 0 {
		return int(min(f.left, int64(max)))
	}
	return 1
}
