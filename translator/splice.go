package translator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/internal/wire"
)

// SpliceResult is what a direct session carried and how it ended.
type SpliceResult struct {
	BytesUp, BytesDown uint64
	// RuntimeLost: the runtime's side ended without a WebSocket close; the
	// client was told so when the cut fell between frames.
	RuntimeLost bool
	// Status is the last status the runtime sent on the error channel (v5
	// and v4.channel.k8s.io; nil: none, one longer than statusMax, or a
	// protocol without one).
	Status *metav1.Status
	// IdleTimeout: the node ended the session after cfg.IdleTimeout
	// without a byte either way, and told the client so.
	IdleTimeout bool
}

// Splice carries a WebSocket session between a client and a runtime that
// speaks the client's protocol itself (kubestream's direct path). Bytes
// pass unchanged, each direction through one buffer of cfg.BufferSize. The
// runtime-to-client direction is followed frame by frame, so that a runtime
// that goes away without closing the WebSocket does not leave the client
// with a bare TCP close: between frames kubestream adds what the runtime
// should have sent — for v5 a status on the error channel, and a close
// frame (1000 after a status, 1011 for the tunnel). When ctx ends (the node
// shutting down), or no byte crossed either way for cfg.IdleTimeout (the
// kubelet's streamingConnectionIdleTimeout, which governs direct sessions
// as it does translated ones), the frame in flight is finished first,
// within cfg.CloseGrace, and the client hears why. When one side ends, the
// other gets a half-close and a liveness window (cfg.PingPeriod +
// cfg.PongTimeout) to finish its closing handshake, which a slow reader
// reaches only after reading all the output; then both connections close.
// Splice returns after both copies have.
//
// Legacy protocols (v4.channel.k8s.io and older, passed through for the
// runtime's own WebSocket server) have no end the node can speak for: their
// runtimes end every session with a bare close after the status. There the
// node adds nothing, half-closes the client and keeps reading it (and
// discarding) until the client closes or is silent for a ping period and a
// pong timeout: closing at once, with the client's pings unread, made the
// kernel reset output the slow client had yet to read.
func Splice(ctx context.Context, client, rt net.Conn, protocol string, cfg Config, obs Observer) SpliceResult {
	channels := binaryChannels(protocol)
	if !channels {
		obs = nil // nothing a recording could read
	}
	s := &splice{ctx: ctx, client: client, rt: rt, protocol: protocol, cfg: cfg,
		legacy: protocol != remotecommand.StreamProtocolV5Name && protocol != portforward.WebsocketsSPDYTunnelingPortForwardV1,
		f:      frameFollower{channels: channels, obs: obs}}
	cf := &clientFollower{obs: obs} // the up copier's
	upDone := make(chan uint64, 1)
	if s.legacy {
		go func() { upDone <- spliceUpAnsweringPings(client, rt, &s.cw, cfg.BufferSize, cf) }()
	} else {
		go func() { upDone <- spliceUp(client, rt, cfg.BufferSize, cf, &s.activity) }()
	}
	stopPings := pingClient(client, &s.cw, cfg)
	stop := context.AfterFunc(ctx, s.wake)
	defer stop()
	if !s.legacy && cfg.IdleTimeout > 0 {
		s.watchIdle()
		defer s.stopIdle()
	}
	readErr := s.down()
	defer func() {
		if s.midFrame {
			s.cw.Unlock()
		}
	}()
	if s.legacy {
		s.endLegacy(readErr, stopPings)
	} else {
		s.end(readErr, stopPings)
	}
	s.res.BytesUp = <-upDone
	if s.closer != nil {
		s.closer.Stop()
	}
	s.closeBoth()
	if !s.legacy {
		s.res.Status = s.f.lastStatus()
	}
	return s.res
}

// splice is one spliced session: Splice's state, each piece named once.
// The down copier (Splice's own goroutine) owns f, midFrame and
// writeDeadline; the up copier (spliceUp or spliceUpAnsweringPings) shares
// only activity and cw.
type splice struct {
	ctx        context.Context
	client, rt net.Conn
	protocol   string
	cfg        Config
	legacy     bool // no end the node can speak for (v4.channel.k8s.io and older)

	activity atomic.Uint64 // data frames either way, for the idle timeout
	// cw keeps the node's own frames (pings; pongs, legacy only) from
	// landing inside a frame the down copy is writing.
	cw sync.Mutex

	// Ending the session from here (the node shutting down, the idle
	// timeout) must not cut a frame in half, or the client could be told
	// nothing: the reader is woken (wake), finishes the frame in flight
	// within CloseGrace (armGrace) and then speaks for the runtime as if it
	// had gone away. mu orders the wake-up, the grace and the idle timer.
	mu         sync.Mutex
	stopping   atomic.Bool // set under mu
	graceArmed bool        // under mu
	idled      atomic.Bool
	idleTimer  *time.Timer // under mu

	f             frameFollower
	midFrame      bool // cw is held: a frame is half written
	writeDeadline time.Time
	closer        *time.Timer // closes both once the client's window after the end passed
	res           SpliceResult
}

func (s *splice) closeBoth() {
	s.client.Close() // done with it: a failed close changes nothing
	s.rt.Close()     // likewise
}

// wake ends the session from outside: the reader's next read returns at
// once.
func (s *splice) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping.Store(true)
	_ = s.rt.SetReadDeadline(time.Now()) // fails only once closed; its I/O then says why
}

// watchIdle wakes the session once no data frame crossed either way for
// cfg.IdleTimeout, checking on a timer (no parked goroutine).
func (s *splice) watchIdle() {
	tick := wire.IdleCheckPeriod(s.cfg.IdleTimeout, 0)
	clock := wire.NewIdleClock(time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idleTimer = time.AfterFunc(tick, func() {
		if clock.Idle(s.activity.Load(), time.Now(), s.cfg.IdleTimeout) {
			s.idled.Store(true)
			s.wake()
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.stopping.Load() {
			s.idleTimer.Reset(tick)
		}
	})
}

func (s *splice) stopIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idleTimer.Stop()
}

// armGrace reports whether the session is ending, replacing the wake-up
// deadline with the grace for the rest of the frame.
func (s *splice) armGrace() bool {
	if !s.stopping.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.graceArmed {
		s.graceArmed = true
		_ = s.rt.SetReadDeadline(time.Now().Add(s.cfg.CloseGrace)) // fails only once closed; its I/O then says why
	}
	return true
}

// down copies the runtime's bytes to the client, following its frames,
// until the runtime's side ends, the client's write fails (nil) or the
// session is stopped between frames; it returns why it stopped reading.
// Inside a frame it holds cw (midFrame).
func (s *splice) down() error {
	buf := make([]byte, s.cfg.BufferSize)
	for {
		want := buf
		if s.armGrace() {
			if s.f.AtBoundary() {
				if err := context.Cause(s.ctx); err != nil {
					return err
				}
				return errSessionIdle
			}
			want = buf[:s.f.Room(len(buf))]
		}
		n, err := s.rt.Read(want)
		if n > 0 {
			if !s.midFrame {
				s.cw.Lock()
				s.midFrame = true
			}
			data := s.f.data
			s.f.follow(buf[:n])
			if s.f.data != data {
				s.activity.Add(1)
			}
			// The deadline moves at most once per slack, not per read: a
			// deadline set is a timer update in the runtime's poller.
			if want := time.Now().Add(s.cfg.WriteTimeout); want.Sub(s.writeDeadline) > wire.Slack(s.cfg.WriteTimeout) {
				s.writeDeadline = want
				_ = s.client.SetWriteDeadline(want) // fails only once closed; its I/O then says why
			}
			_, werr := s.client.Write(buf[:n])
			if s.f.AtBoundary() {
				s.cw.Unlock()
				s.midFrame = false
			}
			if werr != nil {
				return nil // the client is gone; nothing to tell it
			}
			s.res.BytesDown += uint64(n)
		}
		if err != nil {
			if wire.IsTimeout(err) && s.stopping.Load() {
				s.mu.Lock()
				woken := !s.graceArmed
				s.mu.Unlock()
				if woken {
					continue
				}
			}
			return err
		}
	}
}

// endLegacy ends a legacy session: nothing more is written down here, so
// a ping can no longer land inside a frame; cw stays the up copier's for
// its pongs (one stuck on a client that reads nothing must not hold the
// close). The client is half-closed and given a liveness window to close.
func (s *splice) endLegacy(readErr error, stopPings func()) {
	stopPings()
	if readErr != nil && s.ctx.Err() == nil && s.f.cutBeforeStatus(s.protocol) {
		// The runtime ended a v4 session without its status, which a v4
		// runtime always sends, success included: the client must not
		// read the bare close as success.
		s.res.RuntimeLost = true
		s.cw.Lock()
		_ = s.client.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)) // fails only once closed; its I/O then says why
		if _, err := s.client.Write(wire.ServerFrame(nil, websocket.BinaryMessage, wire.StatusFrame(wire.InternalError(runtimeEndedMsg)))); err != nil {
			klog.FromContext(s.ctx).V(3).Info("Telling the client the runtime ended the session failed", "err", err)
		}
		s.cw.Unlock()
	}
	_ = upgrade.CloseWrite(s.client)                                                   // the peer is gone already if it fails
	s.rt.Close()                                                                       // done with it: a failed close changes nothing
	_ = s.client.SetReadDeadline(time.Now().Add(s.cfg.PingPeriod + s.cfg.PongTimeout)) // fails only once closed; its I/O then says why
}

// end ends a v5 or tunnel session: when the runtime could not say why it
// ended, the node does (endFrames) between frames, with no ping in
// between; then the client gets the liveness window, not CloseGrace, to
// answer: a slow reader behind the apiserver reaches the close frame only
// after reading everything before it, pinging all the while, and closing
// on those pings would make the kernel reset what the apiserver still
// holds for it (bench-node's slow reader).
func (s *splice) end(readErr error, stopPings func()) {
	if !s.midFrame {
		s.cw.Lock() // no ping may land inside the end frames written below
		s.midFrame = true
	}
	stopPings()
	if readErr != nil && !s.f.sawClose {
		msg := "session cancelled: " + stopMessage(s.ctx)
		switch {
		case s.idled.Load() && s.ctx.Err() == nil:
			s.res.IdleTimeout = true
			msg = fmt.Sprintf("session idle for %s, closed by the node", s.cfg.IdleTimeout)
		case s.ctx.Err() == nil:
			s.res.RuntimeLost = true
			msg = "container runtime connection lost"
			if !errors.Is(readErr, io.EOF) {
				msg += ": " + readErr.Error()
			}
		}
		if s.f.AtBoundary() {
			_ = s.client.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)) // fails only once closed; its I/O then says why
			_, _ = s.client.Write(endFrames(s.protocol, msg))                 // the last words: a client that cannot take them is gone
		}
	}
	_ = upgrade.CloseWrite(s.client) // the peer is gone already if it fails
	s.closer = time.AfterFunc(s.cfg.PingPeriod+s.cfg.PongTimeout, s.closeBoth)
}

// pingClient pings the client every cfg.PingPeriod on the node's own
// behalf, as the translated route does (a WebSocket proxy or load balancer
// in front judges the connection by them; the runtime's own pings keep its
// period). A ping goes between the runtime's frames, under cw; one that
// falls due inside a frame is skipped, not waited for, so a runtime that
// stalls mid-frame holds no goroutine here. The client's pongs go on to
// the runtime, which ignores unsolicited pongs (RFC 6455, 5.5.3). stop
// ends the pings: called with cw held, no ping is written after it
// returns.
func pingClient(client net.Conn, cw *sync.Mutex, cfg Config) (stop func()) {
	if cfg.PingPeriod <= 0 {
		return func() {}
	}
	var (
		mu      sync.Mutex
		stopped bool // under mu and cw
		timer   *time.Timer
	)
	ping := wire.ServerFrame(nil, websocket.PingMessage, nil)
	send := func() {
		if cw.TryLock() {
			mu.Lock()
			live := !stopped
			mu.Unlock()
			if live {
				// The down copy moves the deadline on only when it writes.
				_ = client.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout)) // fails only once closed; its I/O then says why
				_, _ = client.Write(ping)                                     // a failed ping is the down copy's error to find
			}
			cw.Unlock()
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer.Reset(cfg.PingPeriod)
		}
	}
	mu.Lock()
	timer = time.AfterFunc(cfg.PingPeriod, send)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}

// errSessionIdle ends a spliced session the idle timeout stopped.
var errSessionIdle = errors.New("session idle")

// spliceUp copies the client's bytes to the runtime unchanged (the runtime
// checks its frames itself) until the client's side ends, then half-closes
// the runtime's. Its buffer is held for the session: the copy blocks in a
// read with it, as io.CopyBuffer does.
func spliceUp(client, rt net.Conn, size int, cf *clientFollower, activity *atomic.Uint64) uint64 {
	buf := make([]byte, size)
	var up uint64
	rtGone := false
	for {
		n, err := client.Read(buf)
		if n > 0 {
			// What is data, for the idle timeout (kubectl's pings are
			// not), and what an observer sees, in one pass.
			data := cf.data
			cf.follow(buf[:n])
			if cf.data != data {
				activity.Add(1)
			}
		}
		if n > 0 && !rtGone {
			if _, werr := rt.Write(buf[:n]); werr != nil {
				// The runtime's side is gone but the client's is not: go
				// on reading it to its end, so what it still sends is
				// not left unread at our close.
				rtGone = true
			} else {
				up += uint64(n)
			}
		}
		if err != nil {
			_ = upgrade.CloseWrite(rt) // the peer is gone already if it fails
			return up
		}
	}
}

// spliceUpAnsweringPings is spliceUp for legacy protocols: it follows the
// client's frames and answers its pings itself (under cw, between the down
// copy's frames) instead of passing them on. A runtime's legacy WebSocket
// server that stalls behind a slow reader leaves forwarded pings unread,
// and its bare close at the end then resets what the node had yet to pass
// on; the pings still keep the client's own path alive.
func spliceUpAnsweringPings(client, rt net.Conn, cw *sync.Mutex, size int, cf *clientFollower) uint64 {
	buf := make([]byte, size)
	var f wire.Follower
	var up uint64
	rtGone := false
	forward := func(b []byte) {
		cf.follow(b) // before the write: b is still masked, as read
		if rtGone {
			return
		}
		if _, err := rt.Write(b); err != nil {
			rtGone = true // read the client on to its end all the same
			return
		}
		up += uint64(len(b))
	}
	// A client's ping being answered: its header, and its payload as it
	// comes (at most wire.MaxControl bytes).
	var ping wire.Header
	var pingBuf [wire.MaxControl]byte
	var pingPayload []byte
	inPing := false
	pong := func() {
		wire.Unmask(ping.Key, 0, pingPayload)
		cw.Lock()
		_, _ = client.Write(wire.ServerFrame(nil, websocket.PongMessage, pingPayload)) // a failed pong is the next read's error to find
		cw.Unlock()
		inPing = false
	}
	defer upgrade.CloseWrite(rt)
	for {
		n, err := client.Read(buf)
		for b := buf[:n]; len(b) > 0; {
			h, header, payload, rest := f.Next(b)
			b = rest
			switch {
			case header && h.Op == websocket.PingMessage && h.Fin && h.Masked && h.Len <= wire.MaxControl:
				ping, pingPayload, inPing = h, pingBuf[:0], true
				if h.Len == 0 {
					pong()
				}
			case header:
				forward(f.RawHeader())
			case inPing:
				pingPayload = append(pingPayload, payload...)
				if len(pingPayload) == int(ping.Len) {
					pong()
				}
			default:
				forward(payload)
			}
		}
		if err != nil {
			return up
		}
	}
}

// endFrames tell the client why its session ended when the runtime could
// not: a v5 status and a normal close, or for the tunnel (no status
// channel) a close 1011 with the reason.
func endFrames(protocol, msg string) []byte {
	if protocol == remotecommand.StreamProtocolV5Name {
		out := wire.ServerFrame(nil, websocket.BinaryMessage, wire.StatusFrame(wire.InternalError(msg)))
		return wire.ServerFrame(out, websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	}
	return wire.ServerFrame(nil, websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseInternalServerErr, wire.CloseReason(msg)))
}

// frameFollower follows a server-to-client byte stream (wire.Follower)
// for what the node needs of it: whether a close went by, how many data
// bytes (pings and pongs keep no session busy), and for the binary channel
// protocols the output an Observer sees and the error channel's last
// message.
type frameFollower struct {
	messageFollower
	sawClose bool

	// For the binary channel protocols (v5, v4.channel.k8s.io), the error
	// channel's last message is kept (the audit record's exit code), in a
	// fixed array, so an idle session allocates nothing for it and the
	// follower stays comparable (FuzzFrameFollowers); output goes to obs.
	channels  bool
	obs       Observer
	status    [statusMax]byte
	statusLen int // -1: the last status did not fit
}

// messageFollower follows a WebSocket byte stream's frames (wire.Follower)
// and, for the binary channel protocols, which message each payload byte
// belongs to: a data frame's payload opens with its channel, a
// continuation goes on with the message it continues, and control frames
// (which may come between a message's fragments) are no part of it. Both
// directions of a splice follow with it (frameFollower, clientFollower).
type messageFollower struct {
	wire.Follower
	atPayload bool   // the next payload byte is a data frame's first (its channel)
	channel   byte   // the current message's channel
	control   bool   // the current frame is a control frame (ping, pong, close)
	data      uint64 // data frames' payload bytes so far (pings keep no session busy)
}

// next is wire.Follower's Next, keeping the message's state.
func (m *messageFollower) next(b []byte) (h wire.Header, header bool, payload, rest []byte) {
	h, header, payload, rest = m.Next(b)
	switch {
	case header:
		m.control = h.Op >= websocket.CloseMessage
		if h.Op == websocket.BinaryMessage || h.Op == websocket.TextMessage {
			m.atPayload, m.channel = h.Len > 0, noChannel
		}
	case !m.control:
		m.data += uint64(len(payload))
	}
	return h, header, payload, rest
}

// statusMax bounds a kept status; a v5 exit status is ~250 bytes plus the
// command line.
const statusMax = 4096

// noChannel is the channel before a message names one.
const noChannel = 0xff

func (f *frameFollower) keep(b []byte) {
	if !f.channels || f.control || len(b) == 0 {
		return
	}
	if f.atPayload {
		f.atPayload = false
		f.channel = b[0]
		if f.channel == ChanError {
			f.statusLen = 0
		}
		b = b[1:]
	}
	switch f.channel {
	case ChanError:
		if f.statusLen < 0 {
			return
		}
		if f.statusLen+len(b) > statusMax {
			f.statusLen = -1
			return
		}
		f.statusLen += copy(f.status[f.statusLen:], b)
	case ChanStdout, ChanStderr:
		if f.obs != nil && len(b) > 0 {
			f.obs.Output(f.channel, b)
		}
	}
}

// runtimeEndedMsg is what a client is told when the runtime's connection
// ended before the session's status.
const runtimeEndedMsg = "the container runtime ended the session without reporting its exit status"

// cutBeforeStatus reports whether a v4.channel.k8s.io session's runtime
// side ended, between frames, before any status on the error channel.
// (v4.base64.channel.k8s.io's text frames are not read here.)
func (f *frameFollower) cutBeforeStatus(protocol string) bool {
	return protocol == remotecommand.StreamProtocolV4Name && !f.sawClose && f.statusLen == 0 && f.AtBoundary()
}

func (f *frameFollower) lastStatus() *metav1.Status {
	if f.statusLen <= 0 {
		return nil
	}
	st := &metav1.Status{}
	if json.Unmarshal(f.status[:f.statusLen], st) != nil {
		return nil
	}
	return st
}

func (f *frameFollower) follow(b []byte) {
	for len(b) > 0 {
		h, header, payload, rest := f.next(b)
		b = rest
		switch {
		case header:
			f.sawClose = f.sawClose || h.Op == websocket.CloseMessage
		default:
			f.keep(payload)
		}
	}
}
