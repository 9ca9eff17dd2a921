// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package spdy is the SPDY/3.1 framing (draft-mbelshe-httpbis-spdy-00 §2)
// that kubestream reads and writes itself: the frame layout, the header
// blocks (written as stored deflate blocks, read through compress/zlib with
// the protocol's dictionary) and the one reader of frames (Reader). The
// translator's runtime-leg client, relay and tunnel and the runtime side's
// tunnel server share it.
//
// Written by hand because spdystream, the library Kubernetes uses, runs
// ~11 goroutines and a zlib compressor (~900 KiB) per connection and
// allocates every frame it reads; nothing here allocates per data frame and
// nothing compresses. Every SPDY/3.1 peer (spdystream, cri-streaming,
// containerd) accepts stored blocks, since they are valid deflate.
//
// Reading order, each file before the files it uses: reader.go (Reader,
// the one reader of frames, and Header, a frame's header as read),
// headers.go (HeaderDecoder: header blocks read) and frame.go (the frame
// layout, frames and header blocks written, the protocol's dictionary).
// Nothing runs back up the order.
package spdy

import (
	"encoding/binary"
	"hash/adler32"
)

// Every frame has an 8-byte header: a control bit, then version and type
// (control) or a stream ID (data); one byte of flags; a 24-bit payload
// length.
const (
	ControlBit     = 0x80
	Version        = 3
	TypeSynStream  = 1
	TypeSynReply   = 2
	TypeRstStream  = 3
	TypeSettings   = 4
	TypePing       = 6
	TypeGoAway     = 7
	TypeHeaders    = 8
	TypeWindowUpd  = 9
	FlagFin        = 0x01
	HeaderLen      = 8
	MaxData        = 1<<24 - 1
	SynStreamFixed = 10 // stream ID, associated stream ID, priority, slot
)

// RST_STREAM status codes (§2.6.3).
const (
	StatusProtocolError = 1
	StatusRefusedStream = 3
	StatusCancel        = 5
)

// Length is the payload length in a frame header.
func Length(h []byte) int { return int(h[5])<<16 | int(h[6])<<8 | int(h[7]) }

// StreamID is the 31-bit stream ID at the start of b: a data frame's
// header, or a SYN_STREAM's, SYN_REPLY's or RST_STREAM's payload.
func StreamID(b []byte) uint32 { return binary.BigEndian.Uint32(b) & 0x7fffffff }

// ControlType is a control frame's type.
func ControlType(h []byte) uint16 { return binary.BigEndian.Uint16(h[2:4]) }

// Control reports whether h is a control frame's header.
func Control(h []byte) bool { return h[0]&ControlBit != 0 }

// PutDataHeader writes a data frame's header for n payload bytes into h.
func PutDataHeader(h []byte, id uint32, n int, fin bool) {
	binary.BigEndian.PutUint32(h[0:4], id&0x7fffffff) // the control bit clear
	h[4] = 0
	if fin {
		h[4] = FlagFin
	}
	h[5], h[6], h[7] = byte(n>>16), byte(n>>8), byte(n)
}

// AppendControl appends a control frame's header for n payload bytes.
func AppendControl(dst []byte, typ uint16, flags byte, n int) []byte {
	return append(dst, ControlBit, Version, byte(typ>>8), byte(typ), flags, byte(n>>16), byte(n>>8), byte(n))
}

// dictionary is SPDY/3's header dictionary, the zlib preset dictionary of
// every header block (draft-mbelshe-httpbis-spdy-00 §2.6.10.1): HTTP
// method, header and status words, each behind its length as a 32-bit
// big-endian number, then status lines, dates and common values as one run.
// TestDictionary checks it against the checksum spdystream's framer writes.
const dictionary = "" +
	"\x00\x00\x00\x07options\x00\x00\x00\x04head\x00\x00\x00\x04post" +
	"\x00\x00\x00\x03put\x00\x00\x00\x06delete\x00\x00\x00\x05trace" +
	"\x00\x00\x00\x06accept\x00\x00\x00\x0eaccept-charset" +
	"\x00\x00\x00\x0faccept-encoding\x00\x00\x00\x0faccept-language" +
	"\x00\x00\x00\x0daccept-ranges\x00\x00\x00\x03age" +
	"\x00\x00\x00\x05allow\x00\x00\x00\x0dauthorization" +
	"\x00\x00\x00\x0dcache-control\x00\x00\x00\x0aconnection" +
	"\x00\x00\x00\x0ccontent-base\x00\x00\x00\x10content-encoding" +
	"\x00\x00\x00\x10content-language\x00\x00\x00\x0econtent-length" +
	"\x00\x00\x00\x10content-location\x00\x00\x00\x0bcontent-md5" +
	"\x00\x00\x00\x0dcontent-range\x00\x00\x00\x0ccontent-type" +
	"\x00\x00\x00\x04date\x00\x00\x00\x04etag\x00\x00\x00\x06expect" +
	"\x00\x00\x00\x07expires\x00\x00\x00\x04from\x00\x00\x00\x04host" +
	"\x00\x00\x00\x08if-match\x00\x00\x00\x11if-modified-since" +
	"\x00\x00\x00\x0dif-none-match\x00\x00\x00\x08if-range" +
	"\x00\x00\x00\x13if-unmodified-since\x00\x00\x00\x0dlast-modified" +
	"\x00\x00\x00\x08location\x00\x00\x00\x0cmax-forwards" +
	"\x00\x00\x00\x06pragma\x00\x00\x00\x12proxy-authenticate" +
	"\x00\x00\x00\x13proxy-authorization\x00\x00\x00\x05range" +
	"\x00\x00\x00\x07referer\x00\x00\x00\x0bretry-after" +
	"\x00\x00\x00\x06server\x00\x00\x00\x02te\x00\x00\x00\x07trailer" +
	"\x00\x00\x00\x11transfer-encoding\x00\x00\x00\x07upgrade" +
	"\x00\x00\x00\x0auser-agent\x00\x00\x00\x04vary" +
	"\x00\x00\x00\x03via\x00\x00\x00\x07warning" +
	"\x00\x00\x00\x10www-authenticate\x00\x00\x00\x06method" +
	"\x00\x00\x00\x03get\x00\x00\x00\x06status\x00\x00\x00\x06200 OK" +
	"\x00\x00\x00\x07version\x00\x00\x00\x08HTTP/1.1" +
	"\x00\x00\x00\x03url\x00\x00\x00\x06public" +
	"\x00\x00\x00\x0aset-cookie\x00\x00\x00\x0akeep-alive" +
	"\x00\x00\x00\x06origin" +
	"100101201202205206300302303304305306307402405406407408409410" +
	"411412413414415416417502504505203 Non-Authoritative Informat" +
	"ion204 No Content301 Moved Permanently400 Bad Request401 Una" +
	"uthorized403 Forbidden404 Not Found500 Internal Server Error" +
	"501 Not Implemented503 Service UnavailableJan Feb Mar Apr Ma" +
	"y Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, " +
	"Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,imag" +
	"e/gif,application/xml,application/xhtml+xml,text/plain,text/" +
	"javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf" +
	"-8charset=iso-8859-1,utf-,*,enq=0."

// zlibPrefix opens every header stream: CMF (deflate, 32 KiB window), FLG
// (FDICT set, best compression as spdystream announces it), and the
// dictionary's Adler-32.
var zlibPrefix = func() [6]byte {
	p := [6]byte{0x78, 0xe0}
	p[1] += byte(31 - (uint16(p[0])<<8|uint16(p[1]))%31) // FCHECK
	binary.BigEndian.PutUint32(p[2:], adler32.Checksum([]byte(dictionary)))
	return p
}()

// AppendHeaderBlock appends a header block holding the name/value pairs in
// kv, as stored (uncompressed) deflate blocks; first opens the connection's
// header stream (each direction has one, so a writer sets it on its first
// block only). Names must be lower case, as SPDY/3 requires.
func AppendHeaderBlock(dst []byte, first bool, kv ...string) []byte {
	if first {
		dst = append(dst, zlibPrefix[:]...)
	}
	n := 4
	for _, s := range kv {
		n += 4 + len(s)
	}
	// BFINAL=0, BTYPE=00, then LEN and its complement. Header blocks here
	// are a few hundred bytes at most, far below a stored block's 64 KiB.
	dst = append(dst, 0, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(kv)/2))
	for _, s := range kv {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
		dst = append(dst, s...)
	}
	// An empty stored block, as a zlib sync flush ends with: the reader's
	// inflater looks for the next block header as soon as a block ends, and
	// must find it inside this frame, not in the next one.
	return append(dst, 0, 0, 0, 0xff, 0xff)
}

// AppendHeaders appends a control frame carrying a header block (a
// SYN_STREAM, SYN_REPLY or HEADERS): its fixed fields (the stream ID and
// what the type puts after it), then the block, its length filled in last.
func AppendHeaders(dst []byte, typ uint16, fixed []byte, first bool, kv ...string) []byte {
	start := len(dst)
	dst = AppendControl(dst, typ, 0, 0)
	dst = append(dst, fixed...)
	dst = AppendHeaderBlock(dst, first, kv...)
	n := len(dst) - start - HeaderLen
	dst[start+5], dst[start+6], dst[start+7] = byte(n>>16), byte(n>>8), byte(n)
	return dst
}
