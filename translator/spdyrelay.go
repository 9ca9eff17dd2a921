package translator

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/internal/wire"
)

// RelaySPDY carries a SPDY/3.1 session (remotecommand v1–v4 or
// portforward.k8s.io) between a client and the runtime that accepted the
// same protocol. Bytes pass unchanged, frame by frame, with two exceptions
// that keep output from being lost:
//
//   - The client's PINGs are answered here and never reach the runtime.
//     A runtime stalled by a slow client stops reading its socket
//     (spdystream answers a PING from its read loop, and that write waits
//     behind the output); when the command ends it closes with those PINGs
//     unread, its kernel answers with a reset, and everything the node had
//     received but not yet passed on is discarded. client-go pings every
//     5 s, so a slow reader lost output silently (kubernetes#124571 on the
//     SPDY path). The PINGs still do their job: the client's path to the
//     node stays alive, and the node's own path to the runtime is its
//     business.
//   - When the runtime's side ends before it closed an error stream (its
//     status for exec and attach, one per forwarded connection), the client
//     is told so on that stream. client-go reads an error stream that just
//     ends as success, so without this a cut session looked complete.
//
// Why a frame-following relay and not SPDY-to-SPDY translation with
// kubestream's own runtime client: following frames costs one 8-byte header
// read per frame on top of a byte copy, keeps exactly one buffer per
// direction, and leaves the client's SPDY session (its flow, its header
// compression) untouched end to end; translating would decode and
// re-encode every stream for no gain.
//
// RelaySPDY returns when both connections are closed and both copiers have
// ended. After the runtime's end the client closes first (or goes silent
// for cfg.PingPeriod + cfg.PongTimeout), so the node never resets data the
// client has yet to read.
func RelaySPDY(ctx context.Context, client, rt net.Conn, protocol string, cfg Config, obs Observer) RelayResult {
	r := &spdyRelay{
		client:     client,
		rt:         rt,
		cfg:        &cfg,
		obs:        obs,
		outStreams: map[uint32]byte{},
		portFwd:    protocol == portforward.PortForwardV1Name,
		jsonStatus: protocol == remotecommand.StreamProtocolV4Name,
		errStreams: map[uint32]bool{},
	}
	if r.portFwd {
		r.pf = newPFResets(klog.FromContext(ctx), cfg.Resets)
	}
	upDone := make(chan struct{})
	go func() {
		defer close(upDone)
		r.up()
	}()
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.stopping = true
		r.mu.Unlock()
		// Wakes the down copier between frames or mid-frame; it tells
		// the client why the session ended.
		_ = rt.SetReadDeadline(time.Now()) // fails only once closed; its I/O then says why
	})
	defer stop()

	downErr := r.down()
	r.tellLost(ctx, downErr)
	_ = rt.Close() // done with it: a failed close changes nothing
	// The client closes once it has read everything (client-go does, after
	// the status); until then the up copier keeps reading it and
	// answering its pings. No half-close from here: a byte-copying proxy
	// on the way (the apiserver's) takes it as the end and closes the
	// client's connection at once, and the client's next ping then resets
	// what it had yet to read. A client that stops sending anything for a
	// ping period and a pong timeout is gone.
	r.runtimeEnded.Store(true)
	r.extendClientDeadline()
	<-upDone
	_ = client.Close() // done with it: a failed close changes nothing
	r.res.Err = downErr
	r.res.Status = r.finalStatus()
	return r.res
}

// finalStatus reads what the error stream said (v4): a Status, or nothing
// at all when the command succeeded.
func (r *spdyRelay) finalStatus() *metav1.Status {
	if !r.jsonStatus || !r.errClosed {
		return nil
	}
	if len(r.status) == 0 {
		return &metav1.Status{Status: metav1.StatusSuccess}
	}
	st := &metav1.Status{}
	if json.Unmarshal(r.status, st) != nil {
		return nil
	}
	return st
}

// RelayResult is what a relayed SPDY session carried and how it ended.
type RelayResult struct {
	BytesUp, BytesDown uint64
	// PingsAnswered counts the client's PINGs the node answered itself.
	PingsAnswered uint64
	// Lost names the error streams the runtime left open: the client was
	// told on each that its session was cut. Zero for a complete session.
	Lost int
	// Err is why the runtime's side ended, nil for a clean close; UpErr
	// why the client's did, nil for a close.
	Err, UpErr error
	// Status is what the runtime sent on the error stream (v4, whose error
	// stream carries a metav1.Status; nil otherwise, or when it did not
	// fit statusMax).
	Status *metav1.Status
}

type spdyRelay struct {
	client, rt net.Conn
	cfg        *Config
	portFwd    bool
	jsonStatus bool // v4: the error stream carries a metav1.Status

	// wmu serialises frames towards the client: the down copier holds it
	// for a whole frame, the up copier for a PING reply.
	wmu sync.Mutex

	mu         sync.Mutex
	stopping   bool            // the node is shutting down (ctx ended)
	upEnded    bool            // the client's side ended first
	errStreams map[uint32]bool // error streams the runtime has not closed; nil: not known

	res RelayResult

	// The up copier's: headers decodes the client's header blocks (one
	// zlib stream across the connection) to learn which streams are error
	// streams, until a frame it cannot hold or read (untracked).
	headers   spdy.HeaderDecoder
	untracked bool

	// runtimeEnded: from then on the client has a liveness deadline.
	runtimeEnded atomic.Bool

	// The down copier's: the grace for the frame in flight is armed once
	// the node stops; framingLost once half a frame went to the client.
	graceArmed, framingLost bool
	// obs, when set, sees stdout and stderr (down copier) and stdin and
	// resizes (up copier); outStreams (under mu) maps the output streams
	// the runtime has not ended to their v5 channels, stdinID and resizeID
	// are the up copier's.
	obs               Observer
	outStreams        map[uint32]byte
	stdinID, resizeID uint32
	resizes           wire.ResizeStream
	badResize         bool
	// status collects the error stream's data (v4), for the audit record;
	// errClosed: the runtime finished an error stream (with no data: the
	// command succeeded).
	status    []byte
	errClosed bool
	// pf keeps a pod's reset of one forwarded connection from ending the
	// whole port-forward (nil for remotecommand).
	pf *pfResets
}

// maxHeaderFrame bounds the header frames the relay decodes; client-go's
// are under 100 bytes. A larger one is passed on undecoded, and the relay
// stops tracking error streams (the zlib context cannot skip a block).
const maxHeaderFrame = 16 << 10

// up copies the client's frames to the runtime, answering the client's
// PINGs itself. It ends when the client's side does; the runtime then gets
// a half-close and the grace to finish.
func (r *spdyRelay) up() {
	br := bufio.NewReaderSize(r.client, wire.ReadBufSize)
	// Held for the session, unlike the tunnel's per-frame borrowing: this
	// loop parks in the header read with frames of the client's own
	// streams (stdin) interleaved with control frames it must rewrite, and
	// what it holds is what the kubelet's own SPDY proxy (io.Copy each
	// way) holds per session too.
	bp := wire.GetBuf(spdy.HeaderLen + r.cfg.BufferSize)
	defer wire.PutBuf(bp)
	buf := *bp
	err := func() error {
		for {
			h := buf[:spdy.HeaderLen]
			if _, err := io.ReadFull(br, h); err != nil {
				return err
			}
			if r.runtimeEnded.Load() {
				r.extendClientDeadline()
			}
			n := spdy.Length(h)
			if h[0]&spdy.ControlBit == 0 {
				if _, err := r.copyFrameSeen(r.rt, br, buf, n, &r.res.BytesUp, nil, r.inputSeen(spdy.StreamID(h))); err != nil {
					return err
				}
				continue
			}
			typ := spdy.ControlType(h)
			switch {
			case typ == spdy.TypePing && n == 4:
				if _, err := io.ReadFull(br, buf[spdy.HeaderLen:spdy.HeaderLen+4]); err != nil {
					return err
				}
				if binary.BigEndian.Uint32(buf[spdy.HeaderLen:])%2 == 1 { // the client's own
					r.wmu.Lock()
					_, werr := r.client.Write(buf[:spdy.HeaderLen+4])
					r.wmu.Unlock()
					if werr != nil {
						return werr
					}
					r.res.PingsAnswered++
					continue
				}
				// A reply to the runtime's PING: the runtime waits for it.
				if _, err := r.rt.Write(buf[:spdy.HeaderLen+4]); err != nil {
					return err
				}
			case typ == spdy.TypeSynStream || typ == spdy.TypeHeaders || typ == spdy.TypeSynReply:
				if err := r.headerFrame(br, buf, n); err != nil {
					return err
				}
			case typ == spdy.TypeRstStream && n == 8:
				if _, err := io.ReadFull(br, buf[spdy.HeaderLen:spdy.HeaderLen+8]); err != nil {
					return err
				}
				r.closeErrStream(spdy.StreamID(buf[spdy.HeaderLen:]))
				if _, err := r.rt.Write(buf[:spdy.HeaderLen+8]); err != nil {
					return err
				}
			default:
				if _, err := r.copyFrame(r.rt, br, buf, n, &r.res.BytesUp, nil); err != nil {
					return err
				}
			}
		}
	}()
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

// extendClientDeadline gives a client whose runtime side has ended a ping
// period and a pong timeout to show it is alive (any frame) or close.
func (r *spdyRelay) extendClientDeadline() {
	_ = r.client.SetReadDeadline(time.Now().Add(r.cfg.PingPeriod + r.cfg.PongTimeout)) // fails only once closed; its I/O then says why
}

// headerFrame passes on a frame with a header block, reading its headers
// on the way when it is small enough.
func (r *spdyRelay) headerFrame(br *bufio.Reader, buf []byte, n int) error {
	if n > maxHeaderFrame || n+spdy.HeaderLen > len(buf) {
		r.stopTracking()
		_, err := r.copyFrame(r.rt, br, buf, n, &r.res.BytesUp, nil)
		return err
	}
	frame := buf[:spdy.HeaderLen+n]
	if _, err := io.ReadFull(br, frame[spdy.HeaderLen:]); err != nil {
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

func (r *spdyRelay) closeErrStream(id uint32) {
	r.mu.Lock()
	delete(r.errStreams, id)
	r.mu.Unlock()
}

// down copies the runtime's frames to the client, following which error
// streams the runtime closes. It returns nil when the runtime closed the
// connection, else why its side ended.
func (r *spdyRelay) down() error {
	br := bufio.NewReaderSize(r.rt, wire.ReadBufSize)
	for {
		var h [spdy.HeaderLen]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			// Between frames a stopping node ends the session at once;
			// inside one (a cut header) the framing is lost either way.
			if err == io.EOF {
				return nil
			}
			return err
		}
		n := spdy.Length(h[:])
		var ends uint32 // an error stream this frame closes
		if h[0]&spdy.ControlBit == 0 {
			if h[4]&spdy.FlagFin != 0 {
				ends = spdy.StreamID(h[:])
			}
		} else if typ := spdy.ControlType(h[:]); typ == spdy.TypeRstStream || (typ == spdy.TypeSynReply && h[4]&spdy.FlagFin != 0) {
			// Both carry the stream ID first; it must be read before the
			// frame goes out, so it is peeked.
			if id, err := br.Peek(4); err == nil && n >= 4 {
				ends = spdy.StreamID(id)
			}
		}
		if r.pf != nil {
			handled, err := r.pfFrame(br, h[:], n, ends)
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
		bp := wire.GetBuf(spdy.HeaderLen + r.cfg.BufferSize)
		copy(*bp, h[:])
		r.wmu.Lock()
		var seen func([]byte)
		if h[0]&spdy.ControlBit == 0 {
			seen = r.outputSeen(spdy.StreamID(h[:]))
		}
		wrote, err := r.copyFrameSeen(r.client, br, *bp, n, &r.res.BytesDown, r.graceForFrame, seen)
		r.wmu.Unlock()
		if err == nil && r.jsonStatus && h[0]&spdy.ControlBit == 0 && n > 0 {
			r.keepStatus(spdy.StreamID(h[:]), (*bp)[spdy.HeaderLen:], n)
		}
		wire.PutBuf(bp)
		if err != nil {
			if wrote {
				// Half a frame went out: nothing more can be framed
				// after it.
				r.framingLost = true
			}
			return err
		}
		if ends != 0 {
			r.mu.Lock()
			if r.errStreams[ends] {
				// Finished or reset by the runtime (cri-streaming resets
				// every stream at the end): what it said there is all.
				r.errClosed = true
			}
			delete(r.outStreams, ends) // its output is complete
			r.mu.Unlock()
			r.closeErrStream(ends)
		}
	}
}

// pfFrame gives one of the runtime's port-forward frames (header h, n
// payload bytes still in br; ends: the stream a RST_STREAM or SYN_REPLY
// ends) to r.pf: held words, their replacement, or the runtime's reset of
// a stream the node reset. It reports whether the frame was handled; if
// not, it has sent whatever must precede it, and the frame goes on.
func (r *spdyRelay) pfFrame(br *bufio.Reader, h []byte, n int, ends uint32) (bool, error) {
	var out []byte
	handled := false
	switch {
	case !spdy.Control(h):
		id := spdy.StreamID(h)
		if handled, out = r.pf.data(id, n); handled {
			var payload [pfSaidMax]byte
			if _, err := io.ReadFull(br, payload[:n]); err != nil {
				return false, err
			}
			out = r.pf.said(id, payload[:n], h[4]&spdy.FlagFin != 0)
		}
	case spdy.ControlType(h) == spdy.TypeRstStream && ends != 0:
		out, handled = r.pf.runtimeReset(ends)
		if handled {
			if _, err := br.Discard(n); err != nil {
				return false, err
			}
		}
	}
	if len(out) == 0 {
		return handled, nil
	}
	r.wmu.Lock()
	_, err := r.client.Write(out)
	r.wmu.Unlock()
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

// copyFrame copies one frame whose 8-byte header is in buf[:8] (already
// read from src) and whose n payload bytes follow in src, header and first
// payload bytes in one write. retry, if set, may let a read that failed
// go on.
func (r *spdyRelay) copyFrame(dst io.Writer, src io.Reader, buf []byte, n int, count *uint64, retry func(error) bool) (wrote bool, err error) {
	return r.copyFrameSeen(dst, src, buf, n, count, retry, nil)
}

// outputSeen is what the down copier shows the observer of a data frame on
// stream id: stdout and stderr, nothing else (nil).
func (r *spdyRelay) outputSeen(id uint32) func([]byte) {
	if r.obs == nil {
		return nil
	}
	r.mu.Lock()
	ch, ok := r.outStreams[id]
	r.mu.Unlock()
	if !ok {
		return nil
	}
	return func(p []byte) { r.obs.Output(ch, p) }
}

// inputSeen is the up copier's: stdin, and the resize stream read as the
// continuous JSON stream client-go writes.
func (r *spdyRelay) inputSeen(id uint32) func([]byte) {
	switch {
	case r.obs == nil || id == 0:
		return nil
	case id == r.stdinID:
		return r.obs.Input
	case id == r.resizeID && !r.badResize:
		return func(p []byte) {
			sizes, err := r.resizes.Feed(p)
			if err != nil {
				r.badResize = true
			}
			for _, s := range sizes {
				r.obs.Resize(s.Width, s.Height)
			}
		}
	}
	return nil
}

// copyFrameSeen is copyFrame showing seen each piece of the payload once
// it is written.
func (r *spdyRelay) copyFrameSeen(dst io.Writer, src io.Reader, buf []byte, n int, count *uint64, retry func(error) bool, seen func([]byte)) (wrote bool, err error) {
	fill := spdy.HeaderLen
	for rem := n; ; {
		k := min(rem, len(buf)-fill)
		for got := 0; got < k; {
			m, err := src.Read(buf[fill+got : fill+k])
			got += m
			if err != nil && got < k && (retry == nil || !retry(err)) {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return wrote, err
			}
		}
		rem -= k
		wrote = true
		if _, err := dst.Write(buf[:fill+k]); err != nil {
			return wrote, err
		}
		if seen != nil && k > 0 {
			seen(buf[fill : fill+k])
		}
		*count += uint64(fill + k)
		if rem == 0 {
			return wrote, nil
		}
		fill = 0
	}
}

// tellLost writes, on every error stream the runtime left open, why the
// session was cut, and half-closes it: client-go reports what it reads
// there as the session's error.
func (r *spdyRelay) tellLost(ctx context.Context, downErr error) {
	r.mu.Lock()
	ids := make([]uint32, 0, len(r.errStreams))
	for id := range r.errStreams {
		ids = append(ids, id)
	}
	outs := make([]uint32, 0, len(r.outStreams))
	for id := range r.outStreams {
		outs = append(outs, id)
	}
	stopping, upEnded := r.stopping, r.upEnded
	r.mu.Unlock()
	if len(ids) == 0 || upEnded || r.framingLost {
		return // complete, or the client ended it and hears nothing more
	}
	var msg string
	switch {
	case stopping || ctx.Err() != nil:
		msg = "session cut: " + stopMessage(ctx)
	case downErr == nil:
		msg = "session cut: the container runtime closed the connection before reporting the session's end"
	default:
		msg = fmt.Sprintf("session cut: lost the connection to the container runtime (%v); output may be incomplete", downErr)
	}
	payload := []byte(msg)
	if r.jsonStatus {
		payload, _ = json.Marshal(wire.InternalError(msg)) // a Status always marshals
	}
	_ = r.client.SetWriteDeadline(time.Now().Add(r.cfg.WriteTimeout)) // fails only once closed; its I/O then says why
	r.wmu.Lock()
	defer r.wmu.Unlock()
	for _, id := range ids {
		if r.writeFin(id, payload) != nil {
			return
		}
		r.res.Lost++
	}
	// The output streams the runtime left open end too: client-go returns
	// the error stream's words only once stdout and stderr have ended, and
	// would otherwise wait for a connection the node keeps open for it.
	for _, id := range outs {
		if r.writeFin(id, nil) != nil {
			return
		}
	}
}

// writeFin writes payload on stream id as its last data frame (under wmu).
func (r *spdyRelay) writeFin(id uint32, payload []byte) error {
	frame := make([]byte, spdy.HeaderLen+len(payload))
	copy(frame[spdy.HeaderLen:], payload)
	binary.BigEndian.PutUint32(frame, id)
	frame[4] = spdy.FlagFin
	frame[5], frame[6], frame[7] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	_, err := r.client.Write(frame)
	return err
}
