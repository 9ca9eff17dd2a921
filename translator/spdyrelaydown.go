// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"io"
	"time"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
)

// down copies the runtime's frames to the client, following which error
// streams the runtime closes. It returns nil when the runtime closed the
// connection, else why its side ended.
func (r *spdyRelay) down() error {
	fr := spdy.NewReader(&wire.StagedReader{R: r.rt})
	dst := &frameWriter{cw: &r.cw, fr: fr}
	for {
		h, err := fr.Next()
		if err != nil {
			// Between frames a stopping node ends the session at once;
			// inside one (a cut header) the framing is lost either way.
			if err == io.EOF {
				return nil
			}
			return err
		}
		ends := frameEnds(fr, h)
		if r.pf != nil {
			handled, err := r.pfFrame(fr, h)
			if err != nil {
				return err
			}
			if handled {
				if ends != 0 {
					r.closeErrStream(ends)
				}
				continue
			}
		}
		if err := r.downFrame(fr, h, dst); err != nil {
			return err
		}
		if ends != 0 {
			r.streamEnded(ends)
		}
	}
}

// frameEnds is the stream one of the runtime's frames ends, 0 for none: a
// data frame's with FIN; a RST_STREAM's, and a SYN_REPLY's with FIN, which
// carry it first in the payload, read (peeked) before the frame goes out.
func frameEnds(fr *spdy.Reader, h spdy.Header) uint32 {
	switch {
	case !h.Control() && h.Fin():
		return h.StreamID()
	case h.Control() && (h.Type() == spdy.TypeRstStream || h.Type() == spdy.TypeSynReply && h.Fin()):
		return fr.Stream()
	}
	return 0
}

// downFrame passes one of the runtime's frames on to the client through
// dst, showing the observer its output and keeping its status. A frame
// that fits the buffer is read whole before it is written, so nothing the
// up copier writes waits on the runtime; a larger one goes in pieces.
func (r *spdyRelay) downFrame(fr *spdy.Reader, h spdy.Header, dst *frameWriter) error {
	bp := wire.GetBuf(spdy.HeaderLen + r.cfg.BufferSize)
	defer wire.PutBuf(bp)
	data := !h.Control()
	show := notShown
	if data {
		show = r.outputShown(h.StreamID())
	}
	if err := r.copyFrame(dst, fr, h, *bp, true, show); err != nil {
		return err // cut after its first piece, it leaves cw mid: downEnded
	}
	if r.jsonStatus && data && h.Length() > 0 {
		r.keepStatus(h.StreamID(), (*bp)[spdy.HeaderLen:], h.Length())
	}
	return nil
}

// streamEnded notes the end of a stream the runtime finished or reset.
func (r *spdyRelay) streamEnded(id uint32) {
	r.mu.Lock()
	if r.errStreams[id] {
		// Finished or reset by the runtime (cri-streaming resets every
		// stream at the end): what it said there is all.
		r.errClosed = true
	}
	delete(r.outStreams, id) // its output is complete
	delete(r.errStreams, id)
	r.mu.Unlock()
}

func (r *spdyRelay) closeErrStream(id uint32) {
	r.mu.Lock()
	delete(r.errStreams, id)
	r.mu.Unlock()
}

// pfFrame gives one of the runtime's port-forward frames to r.pf
// (pfResets.runtimeFrame) and sends what must precede it, or replace it.
// It reports whether the frame was handled; if not, the frame goes on.
func (r *spdyRelay) pfFrame(fr *spdy.Reader, h spdy.Header) (bool, error) {
	out, handled, err := r.pf.runtimeFrame(fr, h)
	if err != nil || len(out) == 0 {
		return handled, err
	}
	err = r.cw.down(out, false) // whole frames
	r.res.BytesDown += uint64(len(out))
	return handled, err
}

// graceForFrame lets the frame in flight finish when the node stops
// mid-frame (the wake-up deadline hit it): cutting it would leave the
// client unable to read the status that follows. It reports whether to
// read on.
func (r *spdyRelay) graceForFrame(err error) bool {
	r.mu.Lock()
	stopping := r.stopping
	r.mu.Unlock()
	if !stopping || r.graceArmed || !wire.IsTimeout(err) {
		return false
	}
	r.graceArmed = true
	_ = r.rt.SetReadDeadline(time.Now().Add(r.cfg.CloseGrace)) // fails only once closed; its I/O then says why
	return true
}

// copyFrame copies one frame: header h, then its payload from fr, through
// buf, header and first payload bytes in one write, and counts it (down:
// the runtime's frame to the client, else the client's to the runtime).
// The observer is shown each piece of the payload once it is written, as
// channel show (notShown: nothing). A read of the runtime's frame that
// fails may go on (graceForFrame).
func (r *spdyRelay) copyFrame(dst io.Writer, fr *spdy.Reader, h spdy.Header, buf []byte, down bool, show byte) error {
	count := &r.res.BytesUp
	if down {
		count = &r.res.BytesDown
	}
	fill := copy(buf, h[:])
	for {
		k := min(fr.Remaining(), len(buf)-fill)
		for got := 0; got < k; {
			m, err := fr.Read(buf[fill+got : fill+k])
			got += m
			if err != nil && got < k && !(down && r.graceForFrame(err)) {
				return err
			}
		}
		if _, err := dst.Write(buf[:fill+k]); err != nil {
			return err
		}
		if show != notShown && k > 0 {
			r.show(show, buf[fill:fill+k])
		}
		*count += uint64(fill + k)
		if fr.Remaining() == 0 {
			return nil
		}
		fill = 0
	}
}

// frameWriter writes the runtime's frames to the client through cw,
// telling it whether fr's frame goes on after each piece.
type frameWriter struct {
	cw *clientWriter
	fr *spdy.Reader
}

func (w *frameWriter) Write(p []byte) (int, error) {
	if err := w.cw.down(p, w.fr.Remaining() > 0); err != nil {
		return 0, err
	}
	return len(p), nil
}

// outputShown is the channel the down copier shows the observer a data
// frame on stream id as: stdout's or stderr's, else notShown.
func (r *spdyRelay) outputShown(id uint32) byte {
	if r.obs == nil {
		return notShown
	}
	r.mu.Lock()
	ch, ok := r.outStreams[id]
	r.mu.Unlock()
	if !ok {
		return notShown
	}
	return ch
}

// keepStatus keeps a data frame's payload when it is on an error stream
// (down copier only). A frame larger than the copy buffer was copied in
// pieces and is not kept; neither is a status over statusMax.
func (r *spdyRelay) keepStatus(id uint32, payload []byte, n int) {
	if n > len(payload) {
		return
	}
	r.mu.Lock()
	isErr := r.errStreams[id]
	r.mu.Unlock()
	if !isErr || len(r.status)+n > statusMax {
		return
	}
	r.status = append(r.status, payload[:n]...)
}
