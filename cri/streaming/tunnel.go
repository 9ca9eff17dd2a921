package streaming

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/connreset"
	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
)

// Limits of one tunnel, stated once.
const (
	// inboxSize bounds the client bytes a stream holds that the runtime has
	// not read yet; a full inbox makes the tunnel's reader wait, as a full
	// TCP window would. An idle stream holds no inbox.
	inboxSize = 64 << 10
	// maxStreams bounds the streams open at once (two per forwarded
	// connection); more are refused with RST_STREAM.
	maxStreams = 1000
	// maxControlFrame bounds the control frames the tunnel reads whole
	// (SYN_STREAM with its compressed headers, RST_STREAM, PING, GOAWAY).
	maxControlFrame = spdy.MaxHeaderBlock + spdy.SynStreamFixed
	// maxDataChunk is the largest data frame written; the runtime's writes
	// are cut to it so the client's reader, which allocates per frame,
	// never holds more.
	maxDataChunk = 32 << 10
)

var (
	errStreamReset  = errors.New("port-forward stream reset")
	errStreamClosed = errors.New("port-forward stream closed for writing")
	errGoAway       = errors.New("client ended the SPDY session")
)

// serveTunnel serves port-forward over the tunnel protocol: SPDY/3.1
// portforward.k8s.io carried in WebSocket binary messages, read and written
// with kubestream's own SPDY framing (internal/spdy), not spdystream: no
// goroutine per stream, no compressor, no allocation per frame.
//
// Goroutines: the handler's goroutine (this one) is the client's only
// reader: it reads frames, opens streams and pairs data with error streams
// by request ID, and copies each data frame into its stream's inbox. Each
// forwarded connection runs the runtime's PortForward on a goroutine of its
// own, which reads the inbox and writes data frames (serialised by
// wire.Conn); this function waits for all of them before it closes.
func (s *server) serveTunnel(w http.ResponseWriter, r *http.Request, sandbox string) {
	logger := klogFor(r, "portforward")
	ws, err := s.pfUpgrader.Upgrade(wire.Hijacker{ResponseWriter: w}, r, nil)
	if err != nil {
		return
	}
	defer s.config.Metrics.session("portforward")()
	s.runTunnel(ws, sandbox, logger)
}

// runTunnel runs a tunnel on an upgraded connection, until the client ends
// it, the server stops or it is idle.
func (s *server) runTunnel(ws *websocket.Conn, sandbox string, logger klog.Logger) {
	wc := wire.NewConn(ws, &s.config.Limits)
	defer wc.Shutdown()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()

	t := &tunnel{
		s: s, wc: wc, in: msgStream{wc: wc}, sandbox: sandbox, logger: logger, ctx: ctx,
		streams: map[uint32]*pfStream{},
		pairs:   pairs{pending: map[string]*streamPair{}, timeout: s.config.StreamCreationTimeout},
	}
	wc.StartKeepalive(nil, func() {
		logger.V(2).Info("Closing idle port-forward tunnel", "idleTimeout", s.config.StreamIdleTimeout)
		wc.CloseWith(nil, websocket.CloseNormalClosure, "idle timeout")
		cancel()
	})
	// Stop, or the idle timeout: the close frame goes out (the reader then
	// sees the client's reply, or the grace deadline) and every stream ends,
	// so the runtime's copies end and a reader waiting for room goes on.
	stop := context.AfterFunc(ctx, func() {
		wc.CloseWith(nil, websocket.CloseGoingAway, "")
		t.resetAll()
	})
	defer stop()

	rerr := t.read()
	stop() // the reader ended first: the close below says why, not "going away"
	cancel()
	t.resetAll()
	t.pairs.stopAll()
	t.forwards.Wait()
	switch {
	case rerr == nil, errors.Is(rerr, errGoAway), wire.PeerClosed(rerr), wc.Closed():
		wc.CloseWith(nil, websocket.CloseNormalClosure, "")
	case errors.Is(rerr, wire.ErrProtocol), errors.Is(rerr, websocket.ErrReadLimit):
		// The WebSocket reader sent the close code.
	case errors.Is(rerr, errTunnelProtocol), errors.Is(rerr, spdy.ErrHeaders):
		logger.V(2).Info("Port-forward client broke the SPDY protocol", "err", rerr)
		wc.CloseWith(nil, websocket.CloseProtocolError, rerr.Error())
		wc.Drain()
	default:
		wc.CloseWith(nil, websocket.CloseNormalClosure, "")
	}
}

var errTunnelProtocol = errors.New("port-forward tunnel")

func tunnelErrf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errTunnelProtocol}, a...)...)
}

// tunnel is one port-forward session's SPDY side.
type tunnel struct {
	s       *server
	wc      *wire.Conn
	sandbox string
	logger  klog.Logger
	ctx     context.Context

	// The reader's alone.
	in     msgStream
	dec    spdy.HeaderDecoder
	lastID uint32 // the highest stream ID the client opened
	hdr    [spdy.HeaderLen]byte
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

// read reads the client's frames until it ends the session, vanishes or
// breaks the protocol.
func (t *tunnel) read() error {
	h := t.hdr[:]
	for {
		if _, err := io.ReadFull(&t.in, h); err != nil {
			return err
		}
		n := spdy.Length(h)
		if !spdy.Control(h) {
			if err := t.data(spdy.StreamID(h), n, h[4]&spdy.FlagFin != 0); err != nil {
				return err
			}
			continue
		}
		if h[0] != spdy.ControlBit || h[1] != spdy.Version {
			return tunnelErrf("SPDY version %d", binary.BigEndian.Uint16(h)&0x7fff)
		}
		typ := spdy.ControlType(h)
		switch typ {
		case spdy.TypeSynStream, spdy.TypeRstStream, spdy.TypePing, spdy.TypeGoAway:
		default: // SETTINGS, WINDOW_UPDATE (spdystream does no flow control), HEADERS
			if _, err := io.CopyN(io.Discard, &t.in, int64(n)); err != nil {
				return wire.EOFErr(0, err)
			}
			continue
		}
		if n > maxControlFrame {
			return tunnelErrf("SPDY control frame of %d bytes", n)
		}
		if cap(t.ctl) < n {
			t.ctl = make([]byte, n)
		}
		p := t.ctl[:n]
		if _, err := io.ReadFull(&t.in, p); err != nil {
			return err
		}
		var err error
		switch typ {
		case spdy.TypeSynStream:
			err = t.open(p, h[4])
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
func (t *tunnel) open(p []byte, flags byte) error {
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
		return t.writeReset(id, spdy.StatusRefusedStream)
	}
	st := &pfStream{t: t, id: id, headers: h, inEOF: flags&spdy.FlagFin != 0,
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
		return t.writeReset(id, spdy.StatusRefusedStream)
	}
	if err := t.reply(id); err != nil {
		return err
	}
	if pair := t.pairs.add(st, t); pair != nil {
		t.forwards.Go(func() { t.forward(pair) })
	}
	return nil
}

// data moves one data frame's payload into its stream's inbox; a frame for
// a stream that is gone (reset, or its forward ended) is read and dropped.
func (t *tunnel) data(id uint32, n int, fin bool) error {
	t.mu.Lock()
	st := t.streams[id]
	t.mu.Unlock()
	if n > 0 {
		bp := wire.GetBuf(maxDataChunk)
		defer wire.PutBuf(bp)
		for n > 0 {
			k := min(n, maxDataChunk)
			if _, err := io.ReadFull(&t.in, (*bp)[:k]); err != nil {
				return wire.EOFErr(0, err)
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

func (t *tunnel) stallLimit() time.Duration {
	return (t.s.config.Limits.PingPeriod + t.s.config.Limits.PongTimeout) / 2
}

func (t *tunnel) reply(id uint32) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	frame := spdy.AppendHeaders(nil, spdy.TypeSynReply, binary.BigEndian.AppendUint32(nil, id), !t.replyStarted)
	t.replyStarted = true
	return t.wc.WriteFrame(frame)
}

func (t *tunnel) writeReset(id uint32, status uint32) error {
	frame := spdy.AppendControl(make([]byte, 0, spdy.HeaderLen+8), spdy.TypeRstStream, 0, 8)
	frame = binary.BigEndian.AppendUint32(frame, id)
	frame = binary.BigEndian.AppendUint32(frame, status)
	return t.wc.WriteFrame(frame)
}

func (t *tunnel) peerReset(id uint32) {
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
func (t *tunnel) remove(sts ...*pfStream) {
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

// resetAll ends every stream: the session is over.
func (t *tunnel) resetAll() {
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

// forward runs one forwarded connection: the runtime copies between the
// data stream and the pod's port; its error goes to the error stream, in
// cri-streaming's words.
func (t *tunnel) forward(p *streamPair) {
	defer t.remove(p.data, p.errs)
	defer p.errs.Close()
	defer p.data.Close()
	port, _ := strconv.ParseInt(p.data.headers.Get(portforward.PortHeader), 10, 32)
	var err error
	t.s.calls.run(func() { err = t.s.runtime.PortForward(t.ctx, t.sandbox, int32(port), p.data) })
	switch reason := connreset.Of(err); {
	case err == nil:
	case p.data.resetByClient():
		// The client gave the connection up (its local peer went away) and
		// waits on the error stream only to learn that the forward ended:
		// client-go ends the whole session on any message there, so the
		// runtime's complaint about the reset stream is not sent. spdystream
		// servers never see one: a reset stream's writes succeed there.
		t.logger.V(4).Info("Port-forward ended by the client's reset", "port", port, "err", err)
	case reason != "":
		// The pod reset or broke this connection mid-stream: it alone
		// ends. Its data stream is reset, so the client's local peer sees
		// the end at once, and its error stream closes empty, since
		// client-go ends the whole session on any word there.
		t.logger.V(2).Info("Port-forward connection broken by the pod", "port", port, "reason", reason, "err", err)
		t.s.config.Metrics.connectionReset(reason)
		if rerr := p.data.Reset(); rerr != nil {
			t.logger.V(3).Info("Resetting a port-forward stream failed", "port", port, "err", rerr)
		}
	default:
		t.logger.V(2).Info("Port-forward failed", "port", port, "err", err)
		if _, werr := io.WriteString(p.errs, fmt.Sprintf("error forwarding port %d to pod %s, uid : %v", port, t.sandbox, err)); werr != nil {
			t.logger.V(3).Info("Reporting a port-forward failure to the client failed", "port", port, "err", werr)
		}
	}
}

// pfStream is one SPDY stream of a tunnel, the io.ReadWriteCloser the
// runtime's PortForward gets. The tunnel's reader fills its inbox; the
// runtime's goroutine reads it and writes.
type pfStream struct {
	t       *tunnel
	id      uint32
	headers http.Header

	mu     sync.Mutex
	cond   sync.Cond // room in the inbox, bytes in it, or an end
	buf    *[]byte   // the inbox's storage, borrowed while it holds bytes
	in     []byte    // client bytes not read yet: (*buf)[off:len(in)]
	off    int
	inEOF  bool // the client half-closed the stream
	unread bool // an error stream: client bytes are dropped
	ended  bool // reset by either side, forwarded, or the session ended
	// clientReset: the client reset the stream (RST_STREAM), as client-go
	// does when the local connection it forwards goes away.
	clientReset bool
	finSent     bool
}

func (st *pfStream) resetByClient() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.clientReset
}

// push waits for room and queues p; bytes for an ended stream are dropped.
// It reports a stall: the runtime read nothing for stallLimit while the
// inbox was full. The tunnel's one reader waits here for every stream, so
// a runtime that stops reading would hold the whole session, and with it
// the only place a vanished client is noticed; past the limit the stream is
// reset instead. The limit is half the liveness window, so the reader is
// back before its own read deadline passes.
func (st *pfStream) push(p []byte, stallLimit time.Duration) (stalled bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for len(p) > 0 && !st.unread {
		if !st.ended && len(st.in)-st.off == inboxSize {
			timedOut := false
			timer := time.AfterFunc(stallLimit, func() {
				st.mu.Lock()
				timedOut = true
				st.cond.Broadcast()
				st.mu.Unlock()
			})
			for !st.ended && !timedOut && len(st.in)-st.off == inboxSize {
				st.cond.Wait()
			}
			timer.Stop()
			if timedOut && !st.ended && len(st.in)-st.off == inboxSize {
				return true
			}
		}
		if st.ended {
			return false
		}
		if st.buf == nil {
			st.buf = wire.GetBuf(inboxSize)
			st.in = (*st.buf)[:0]
		} else if st.off > 0 {
			st.in = st.in[:copy(st.in, st.in[st.off:])]
			st.off = 0
		}
		k := min(len(p), inboxSize-len(st.in))
		st.in = append(st.in, p[:k]...)
		p = p[k:]
		st.cond.Broadcast()
	}
	return false
}

func (st *pfStream) finRead() {
	st.mu.Lock()
	st.inEOF = true
	st.cond.Broadcast()
	st.mu.Unlock()
}

// end stops the stream without a word to the client (it reset the stream,
// or the forward or the session is over); it returns the inbox.
func (st *pfStream) end() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ended = true
	st.release()
	st.cond.Broadcast()
}

func (st *pfStream) release() {
	if st.buf != nil {
		wire.PutBuf(st.buf)
		st.buf, st.in, st.off = nil, nil, 0
	}
}

func (st *pfStream) Read(p []byte) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for !st.ended && !st.inEOF && len(st.in) == st.off {
		st.cond.Wait()
	}
	switch {
	case len(st.in) > st.off:
		n := copy(p, st.in[st.off:])
		if st.off += n; st.off == len(st.in) {
			st.release() // an idle stream holds no buffer
		}
		st.cond.Broadcast()
		return n, nil
	case st.ended:
		return 0, errStreamReset
	default:
		return 0, io.EOF
	}
}

// Write sends p as data frames.
func (st *pfStream) Write(p []byte) (int, error) {
	var h [spdy.HeaderLen]byte
	written := 0
	for len(p) > 0 {
		st.mu.Lock()
		ended, fin := st.ended, st.finSent
		st.mu.Unlock()
		if ended {
			return written, errStreamReset
		}
		if fin {
			return written, errStreamClosed
		}
		k := min(len(p), maxDataChunk)
		spdy.PutDataHeader(h[:], st.id, k, false)
		if err := st.t.wc.WritePrefixed(h[:], p[:k]); err != nil {
			return written, err
		}
		written += k
		p = p[k:]
	}
	return written, nil
}

// Close half-closes the stream: the client reads EOF. A stream that ended
// (reset by either side, or the session is over) sends nothing more.
func (st *pfStream) Close() error {
	st.mu.Lock()
	done := st.finSent || st.ended
	st.finSent = true
	st.mu.Unlock()
	if done {
		return nil
	}
	var h [spdy.HeaderLen]byte
	spdy.PutDataHeader(h[:], st.id, 0, true)
	return st.t.wc.WriteFrame(h[:])
}

// Reset ends the stream and tells the client.
func (st *pfStream) Reset() error {
	st.end()
	return st.t.writeReset(st.id, spdy.StatusCancel)
}

// checkStream is cri-streaming's check of a new stream's headers.
func checkStream(h http.Header) error {
	port, err := strconv.ParseUint(h.Get(portforward.PortHeader), 10, 16)
	if err != nil || port < 1 {
		return fmt.Errorf("invalid %q header %q", portforward.PortHeader, h.Get(portforward.PortHeader))
	}
	if t := h.Get(portforward.StreamType); t != portforward.StreamTypeData && t != portforward.StreamTypeError {
		return fmt.Errorf("invalid stream type %q", t)
	}
	return nil
}

// pairs matches data and error streams by request ID. Only the reader
// touches it, except the timers, which take mu.
type pairs struct {
	mu      sync.Mutex
	pending map[string]*streamPair
	timeout time.Duration
}

type streamPair struct {
	data, errs *pfStream
	timer      *time.Timer
}

// add files a stream; it returns the pair once both of its streams came.
// A pair whose other half does not come within the creation timeout is
// reset, as cri-streaming does.
func (pf *pairs) add(st *pfStream, t *tunnel) *streamPair {
	id := requestID(st)
	pf.mu.Lock()
	defer pf.mu.Unlock()
	p, ok := pf.pending[id]
	if !ok {
		p = &streamPair{}
		pf.pending[id] = p
		p.timer = time.AfterFunc(pf.timeout, func() {
			pf.mu.Lock()
			defer pf.mu.Unlock()
			if pf.pending[id] != p {
				return
			}
			delete(pf.pending, id)
			for _, s := range []*pfStream{p.data, p.errs} {
				if s != nil {
					_ = s.Reset()
					t.remove(s)
				}
			}
		})
	}
	dup := false
	if st.headers.Get(portforward.StreamType) == portforward.StreamTypeData {
		dup, p.data = p.data != nil, st
	} else {
		dup, p.errs = p.errs != nil, st
	}
	if dup {
		_ = st.Reset() // a second stream of one type for a request
		t.remove(st)
		return nil
	}
	if p.data == nil || p.errs == nil {
		return nil
	}
	p.timer.Stop()
	delete(pf.pending, id)
	return p
}

func (pf *pairs) stopAll() {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	for id, p := range pf.pending {
		p.timer.Stop()
		delete(pf.pending, id)
	}
}

// requestID is the stream's request ID header, or for clients that send
// none, cri-streaming's fallback on stream identifiers (the data stream is
// created right after its error stream).
func requestID(st *pfStream) string {
	if id := st.headers.Get(portforward.PortForwardRequestIDHeader); id != "" {
		return id
	}
	n := int(st.id)
	if st.headers.Get(portforward.StreamType) == portforward.StreamTypeData {
		n -= 2
	}
	return strconv.Itoa(n)
}

// msgStream is the client's binary messages as one byte stream: SPDY frames
// may be cut anywhere between messages (client-go writes a frame's header
// and payload as separate messages).
type msgStream struct {
	wc  *wire.Conn
	msg io.Reader
}

func (m *msgStream) Read(p []byte) (int, error) {
	for {
		if m.msg == nil {
			mt, r, err := m.wc.NextReader()
			if err != nil {
				return 0, err
			}
			if mt != websocket.BinaryMessage {
				return 0, tunnelErrf("tunnel carries binary messages only, got type %d", mt)
			}
			m.msg = r
		}
		n, err := m.msg.Read(p)
		if err == io.EOF {
			m.msg = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}
