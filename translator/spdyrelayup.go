// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"encoding/binary"
	"errors"
	"io"
	"time"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/internal/wire"
)

// up copies the client's frames to the runtime, answering the client's
// PINGs itself. It ends when the client's side does; the runtime then gets
// a half-close and the grace to finish.
func (r *spdyRelay) up() {
	fr := spdy.NewReader(&wire.StagedReader{R: r.client})
	// Held for the session, unlike the tunnel's per-frame borrowing: this
	// loop parks in the header read with frames of the client's own
	// streams (stdin) interleaved with control frames it must rewrite, and
	// what it holds is what the kubelet's own SPDY proxy (io.Copy each
	// way) holds per session too.
	bp := wire.GetBuf(spdy.HeaderLen + r.cfg.BufferSize)
	defer wire.PutBuf(bp)
	err := r.upFrames(fr, *bp)
	r.mu.Lock()
	r.upEnded = true
	r.mu.Unlock()
	if err != nil && !errors.Is(err, io.EOF) && !wire.IsTimeout(err) {
		r.res.UpErr = err
	}
	// The client is gone or done: the runtime hears EOF and ends the
	// session; if it does not within the grace, the down copier is cut.
	_ = upgrade.CloseWrite(r.rt)                               // the peer is gone already if it fails
	_ = r.rt.SetReadDeadline(time.Now().Add(r.cfg.CloseGrace)) // fails only once closed; its I/O then says why
}

// upFrames passes on the client's frames until its side ends, and says
// why.
func (r *spdyRelay) upFrames(fr *spdy.Reader, buf []byte) error {
	for {
		h, err := fr.Next()
		if err != nil {
			return err
		}
		if r.runtimeEnded.Load() {
			r.extendClientDeadline()
		}
		if h.Control() {
			err = r.upControl(fr, h, buf)
		} else {
			err = r.copyFrame(r.rt, fr, h, buf, false, r.inputShown(h.StreamID()))
		}
		if err != nil {
			return err
		}
	}
}

// upControl passes on one of the client's control frames, reading what the
// relay needs of it on the way: PINGs (answered here), header frames (the
// streams the client opens), resets (an error stream the client ends).
func (r *spdyRelay) upControl(fr *spdy.Reader, h spdy.Header, buf []byte) error {
	n := h.Length()
	switch typ := h.Type(); {
	case typ == spdy.TypePing && n == 4:
		return r.ping(fr, h, buf[:spdy.HeaderLen+4])
	case typ == spdy.TypeSynStream || typ == spdy.TypeHeaders || typ == spdy.TypeSynReply:
		return r.headerFrame(fr, h, buf)
	case typ == spdy.TypeRstStream && n == 8:
		frame := buf[:spdy.HeaderLen+8]
		copy(frame, h[:])
		if err := fr.ReadFull(frame[spdy.HeaderLen:]); err != nil {
			return err
		}
		r.closeErrStream(spdy.StreamID(frame[spdy.HeaderLen:]))
		_, err := r.rt.Write(frame)
		return err
	}
	return r.copyFrame(r.rt, fr, h, buf, false, notShown)
}

// ping answers the client's own PING (RelaySPDY says why here) and passes
// on its reply to one of the runtime's, which the runtime waits for.
func (r *spdyRelay) ping(fr *spdy.Reader, h spdy.Header, frame []byte) error {
	copy(frame, h[:])
	if err := fr.ReadFull(frame[spdy.HeaderLen:]); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(frame[spdy.HeaderLen:])%2 == 0 {
		_, err := r.rt.Write(frame)
		return err
	}
	err := r.cw.control(frame, true)
	if err == nil {
		r.res.PingsAnswered++
	}
	return err
}

// extendClientDeadline gives a client whose runtime side has ended a ping
// period and a pong timeout to show it is alive (any frame) or close.
func (r *spdyRelay) extendClientDeadline() {
	_ = r.client.SetReadDeadline(time.Now().Add(r.cfg.PingPeriod + r.cfg.PongTimeout)) // fails only once closed; its I/O then says why
}

// maxHeaderFrame bounds the header frames the relay decodes; client-go's
// are under 100 bytes. A larger one is passed on undecoded, and the relay
// stops tracking error streams (the zlib context cannot skip a block).
const maxHeaderFrame = 16 << 10

// headerFrame passes on a frame with a header block, reading its headers
// on the way when it is small enough.
func (r *spdyRelay) headerFrame(fr *spdy.Reader, h spdy.Header, buf []byte) error {
	n := h.Length()
	if n > maxHeaderFrame || n+spdy.HeaderLen > len(buf) {
		r.stopTracking()
		return r.copyFrame(r.rt, fr, h, buf, false, notShown)
	}
	frame := buf[:spdy.HeaderLen+n]
	copy(frame, h[:])
	if err := fr.ReadFull(frame[spdy.HeaderLen:]); err != nil {
		return err
	}
	r.decodeHeaders(frame)
	if _, err := r.rt.Write(frame); err != nil {
		return err
	}
	r.res.BytesUp += uint64(len(frame))
	return nil
}

// decodeHeaders feeds one header frame to the client's header decoder and
// records the stream if it is an error stream.
func (r *spdyRelay) decodeHeaders(frame []byte) {
	if r.untracked {
		return
	}
	id, h, syn, err := decodeClientHeaders(&r.headers, frame)
	if err != nil {
		// The zlib context is lost with a frame it could not read.
		r.stopTracking()
		return
	}
	if !syn {
		return
	}
	if r.pf != nil {
		r.pf.opened(id, h)
	}
	switch h.Get("streamType") {
	case "error":
		r.mu.Lock()
		if r.errStreams != nil {
			r.errStreams[id] = true
		}
		r.mu.Unlock()
	case "stdout", "stderr":
		ch := byte(ChanStdout)
		if h.Get("streamType") == "stderr" {
			ch = ChanStderr
		}
		r.mu.Lock()
		r.outStreams[id] = ch
		r.mu.Unlock()
	case "stdin":
		r.stdinID = id
	case "resize":
		r.resizeID = id
	}
}

// stopTracking gives up on error streams for the rest of the session (up
// copier only).
func (r *spdyRelay) stopTracking() {
	r.untracked, r.headers = true, spdy.HeaderDecoder{}
	if r.pf != nil {
		r.pf.lost()
	}
	r.mu.Lock()
	r.errStreams = nil
	r.mu.Unlock()
}

// inputShown is the channel the up copier shows the observer a data frame
// on stream id as: stdin's, the resize stream's, else notShown.
func (r *spdyRelay) inputShown(id uint32) byte {
	switch {
	case r.obs == nil || id == 0:
		return notShown
	case id == r.stdinID:
		return ChanStdin
	case id == r.resizeID:
		return ChanResize
	}
	return notShown
}

// notShown: a payload the observer is not shown.
const notShown byte = 0xff

// show shows the observer a piece of a payload the relay passed on, as
// channel ch (v5's numbering): stdin, a resize stream's JSON, or output.
func (r *spdyRelay) show(ch byte, p []byte) {
	switch ch {
	case ChanStdin:
		r.obs.Input(p)
	case ChanResize:
		r.resizes.feed(r.obs, p)
	default:
		r.obs.Output(ch, p)
	}
}
