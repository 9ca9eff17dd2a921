// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"encoding/binary"
	"net/http"
	"strconv"
	"sync"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/connreset"
	"github.com/kubestream/kubestream/internal/spdy"
)

// ResetCounter counts, as the node meets them, the forwarded connections a
// pod reset or broke mid-stream (reason: connreset's) on a route that
// carries a runtime's port-forward SPDY session (the tunnel, the SPDY
// relay).
type ResetCounter interface {
	ConnectionReset(reason string)
}

// pfSaidMax bounds what the node holds of a runtime's words on one error
// stream; cri-streaming's messages are a few hundred bytes. Longer words
// are passed on as they are.
const pfSaidMax = 4096

// pfResets keeps a SPDY port-forward session whole when the pod resets one
// of its connections, on routes where the runtime speaks SPDY and its only
// account of the reset is the words it writes on that connection's error
// stream (connreset says why the client must not read them). The runtime's
// data frames on error streams are held until the stream ends; words that
// report a reset are replaced by a reset of the connection's data stream
// and an empty end of its error stream, anything else goes on unchanged.
//
// The up copier tells it the streams the client opens (opened, from their
// decoded headers); the down copier asks it about the runtime's frames
// (holds, then said or dropped). Both under mu.
type pfResets struct {
	logger klog.Logger
	count  ResetCounter

	// The up copier's: the client's header stream, when pf reads it
	// itself (the tunnel; the relay decodes for more than pf).
	dec spdy.HeaderDecoder
	// The down copier's: a held frame's payload, read here so that holding
	// one allocates nothing.
	scratch [pfSaidMax]byte

	mu        sync.Mutex
	byRequest map[string]*pfConn // the client's connections by request ID
	errs      map[uint32]*pfConn // by error stream ID
	dropped   map[uint32]bool    // data streams the node reset for the client
	untracked bool               // the client's headers could not be read
}

// pfConn is one forwarded connection's two streams, as the client opened
// them, and what the runtime wrote on its error stream so far.
type pfConn struct {
	errID, dataID uint32
	said          []byte
}

func newPFResets(logger klog.Logger, count ResetCounter) *pfResets {
	return &pfResets{logger: logger, count: count,
		byRequest: map[string]*pfConn{}, errs: map[uint32]*pfConn{}, dropped: map[uint32]bool{}}
}

// opened records a stream the client opened (a SYN_STREAM's ID and
// headers). Streams are paired as cri-streaming pairs them: by request ID,
// or for clients that send none, by stream ID (the data stream follows its
// error stream).
func (p *pfResets) opened(id uint32, h http.Header) {
	typ := h.Get("streamType")
	key := h.Get("requestID")
	if key == "" {
		n := int(id)
		if typ == "data" {
			n -= 2
		}
		key = strconv.Itoa(n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.untracked || (typ != "error" && typ != "data") {
		return
	}
	c := p.byRequest[key]
	if c == nil {
		if len(p.byRequest) >= 2*maxTrackedConns {
			return // bounded; an untracked connection's words pass unchanged
		}
		c = &pfConn{}
		p.byRequest[key] = c
	}
	if typ == "error" {
		c.errID = id
		p.errs[id] = c
	} else {
		c.dataID = id
	}
	if c.errID != 0 && c.dataID != 0 {
		delete(p.byRequest, key) // paired: found by its error stream from now on
	}
}

// clientFrame reads one of the client's header frames (SYN_STREAM,
// SYN_REPLY, HEADERS) whole, as the tunnel's up copy reads it: nil for
// one too large to hold, which loses the header stream.
func (p *pfResets) clientFrame(frame []byte) {
	p.mu.Lock()
	untracked := p.untracked
	p.mu.Unlock()
	if untracked {
		return
	}
	if frame == nil {
		p.lost()
		return
	}
	id, h, syn, err := decodeClientHeaders(&p.dec, frame)
	switch {
	case err != nil: // the header stream is lost with it
		p.lost()
	case syn:
		p.opened(id, h)
	}
}

// maxTrackedConns bounds the connections followed at once, as
// cri-streaming's tunnel bounds its streams.
const maxTrackedConns = 1000

// lost gives up following (the client's header stream could not be read):
// the runtime's words pass unchanged from then on.
func (p *pfResets) lost() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.untracked = true
	clear(p.byRequest)
}

// runtimeFrame gives pf one of the runtime's frames, its header h read and
// its payload next in fr: words held on an error stream, their
// replacement, or the runtime's reset of a stream the node reset. It
// returns what goes to the client before the frame, and whether the frame
// is handled: consumed here, out sent in its place. The down copier's.
func (p *pfResets) runtimeFrame(fr *spdy.Reader, h spdy.Header) (out []byte, handled bool, err error) {
	switch {
	case !h.Control():
		id := h.StreamID()
		if handled, out = p.data(id, h.Length()); handled {
			// A dropped stream's frame may be larger than the words held,
			// but only its FIN matters: the rest is skipped.
			payload := p.scratch[:min(h.Length(), len(p.scratch))]
			if err := fr.ReadFull(payload); err != nil {
				return nil, false, err
			}
			if err := fr.Skip(); err != nil {
				return nil, false, err
			}
			out = p.said(id, payload, h.Fin())
		}
	case h.Type() == spdy.TypeRstStream:
		if id := fr.Stream(); id != 0 {
			if out, handled = p.runtimeReset(id); handled {
				if err := fr.Skip(); err != nil {
					return nil, false, err
				}
			}
		}
	}
	return out, handled, nil
}

// data is what the down copier asks of each of the runtime's data frames
// (stream id, n payload bytes), under one lock: whether the node holds the
// frame (words on an error stream, or a data stream the node reset: read
// its payload and pass it to said), and otherwise what must go before it
// (an error stream's held words, once the runtime writes past
// pfSaidMax: its words pass unchanged from then on).
func (p *pfResets) data(id uint32, n int) (hold bool, before []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropped[id] {
		return true, nil
	}
	c := p.errs[id]
	switch {
	case c == nil:
		return false, nil
	case c.dataID != 0 && len(c.said)+n <= pfSaidMax:
		return true, nil
	}
	delete(p.errs, id)
	if len(c.said) == 0 {
		return false, nil
	}
	return false, appendData(nil, id, c.said, false)
}

// said takes a held data frame's payload; it returns the frames to send
// the client in its place (none while words are held).
func (p *pfResets) said(id uint32, payload []byte, fin bool) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropped[id] {
		if fin {
			delete(p.dropped, id)
		}
		return nil
	}
	c := p.errs[id]
	c.said = append(c.said, payload...)
	if !fin {
		return nil
	}
	if rst := p.ended(c); rst != nil {
		return appendData(rst, id, nil, true) // the error stream ends empty
	}
	return appendData(nil, id, c.said, true)
}

// runtimeReset takes the runtime's RST_STREAM of stream id (cri-streaming
// resets a connection's streams once its forward ends, so an error stream
// may end so rather than with a FIN): it returns the frames to send before
// the reset, and whether the reset itself is dropped (the node reset that
// stream already). An error stream's reset goes on either way: the client
// reads it as an empty end.
func (p *pfResets) runtimeReset(id uint32) (before []byte, drop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropped[id] {
		delete(p.dropped, id)
		return nil, true
	}
	c := p.errs[id]
	if c == nil {
		return nil, false
	}
	if rst := p.ended(c); rst != nil || len(c.said) == 0 {
		return rst, false
	}
	return appendData(nil, id, c.said, false), false
}

// ended settles a connection whose error stream the runtime ended: when
// its words report a reset, the data stream's reset for the client (and
// the node drops the runtime's frames on that stream from then on); nil
// when they report anything else, which the caller passes on. Under mu.
func (p *pfResets) ended(c *pfConn) []byte {
	delete(p.errs, c.errID)
	reason := connreset.FromMessage(string(c.said))
	if reason == "" {
		return nil
	}
	p.logger.V(2).Info("Port-forward connection broken by the pod; resetting it alone", "reason", reason, "runtime", string(c.said))
	if p.count != nil {
		p.count.ConnectionReset(reason)
	}
	p.dropped[c.dataID] = true
	out := spdy.AppendControl(nil, spdy.TypeRstStream, 0, 8)
	out = binary.BigEndian.AppendUint32(out, c.dataID)
	return binary.BigEndian.AppendUint32(out, spdy.StatusCancel)
}

// appendData appends a data frame carrying payload on stream id.
func appendData(dst []byte, id uint32, payload []byte, fin bool) []byte {
	var h [spdy.HeaderLen]byte
	spdy.PutDataHeader(h[:], id, len(payload), fin)
	return append(append(dst, h[:]...), payload...)
}

// decodeClientHeaders reads the header block of a frame the client sent
// (SYN_STREAM, SYN_REPLY or HEADERS) with the client's decoder; id and syn
// describe a SYN_STREAM. An error means the header stream is lost.
func decodeClientHeaders(dec *spdy.HeaderDecoder, frame []byte) (id uint32, h http.Header, syn bool, err error) {
	if len(frame) < spdy.HeaderLen {
		return 0, nil, false, spdy.ErrHeaders
	}
	off := spdy.HeaderLen + 4 // SYN_REPLY, HEADERS: the stream ID
	if spdy.ControlType(frame) == spdy.TypeSynStream {
		off = spdy.HeaderLen + spdy.SynStreamFixed
	}
	if len(frame) < off {
		return 0, nil, false, spdy.ErrHeaders
	}
	if h, err = dec.Decode(frame[off:]); err != nil {
		return 0, nil, false, err
	}
	return spdy.StreamID(frame[spdy.HeaderLen:]), h, spdy.ControlType(frame) == spdy.TypeSynStream, nil
}
