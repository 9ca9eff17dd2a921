package translator

import (
	"bufio"
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
	var res SpliceResult
	legacy := protocol != remotecommand.StreamProtocolV5Name && protocol != portforward.WebsocketsSPDYTunnelingPortForwardV1
	channels := binaryChannels(protocol)
	if !channels {
		obs = nil // nothing a recording could read
	}
	var cf *clientFollower // the up copier's, when something observes
	if obs != nil {
		cf = &clientFollower{obs: obs}
	}
	upDone := make(chan uint64, 1)
	var activity atomic.Uint64 // data frames either way, for the idle timeout
	// cw keeps the node's own frames (pongs, legacy only) from landing
	// inside a frame the down copy is writing.
	var cw sync.Mutex
	if legacy {
		go func() { upDone <- spliceUpAnsweringPings(client, rt, &cw, cfg.BufferSize, cf) }()
	} else {
		go func() { upDone <- spliceUp(client, rt, cfg.BufferSize, cf, &activity) }()
	}
	closeBoth := func() { client.Close(); rt.Close() }
	stopPings := pingClient(client, &cw, cfg)
	// Ending the session from here (the node shutting down) must not cut
	// a frame in half, or the client could be told nothing: the reader is
	// woken, finishes the frame in flight (within CloseGrace) and then
	// speaks for the runtime as if it had gone away.
	var (
		mu         sync.Mutex
		stopping   atomic.Bool // under mu when set
		graceArmed bool        // the reader's deadline for the frame in flight; under mu
	)
	wake := func() {
		mu.Lock()
		defer mu.Unlock()
		stopping.Store(true)
		_ = rt.SetReadDeadline(time.Now()) // fails only once closed; its I/O then says why
	}
	stop := context.AfterFunc(ctx, wake)
	defer stop()
	var idled atomic.Bool
	if !legacy && cfg.IdleTimeout > 0 {
		tick := wire.IdleCheckPeriod(cfg.IdleTimeout, 0)
		clock := wire.NewIdleClock(time.Now())
		var timer *time.Timer
		check := func() {
			if clock.Idle(activity.Load(), time.Now(), cfg.IdleTimeout) {
				idled.Store(true)
				wake()
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !stopping.Load() {
				timer.Reset(tick)
			}
		}
		mu.Lock()
		timer = time.AfterFunc(tick, check)
		mu.Unlock()
		defer func() {
			mu.Lock()
			timer.Stop()
			mu.Unlock()
		}()
	}
	// armGrace reports whether the session is ending, replacing the
	// wake-up deadline with the grace for the rest of the frame.
	armGrace := func() bool {
		if !stopping.Load() {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if !graceArmed {
			graceArmed = true
			_ = rt.SetReadDeadline(time.Now().Add(cfg.CloseGrace)) // fails only once closed; its I/O then says why
		}
		return true
	}

	f := frameFollower{channels: channels, obs: obs}
	buf := make([]byte, cfg.BufferSize)
	var readErr error
	midFrame := false // cw held
	var writeDeadline time.Time
	defer func() {
		if midFrame {
			cw.Unlock()
		}
	}()
	for {
		want := buf
		if armGrace() {
			if f.AtBoundary() {
				readErr = context.Cause(ctx)
				if readErr == nil {
					readErr = errSessionIdle
				}
				break
			}
			want = buf[:f.Room(len(buf))]
		}
		n, err := rt.Read(want)
		if n > 0 {
			if !midFrame {
				cw.Lock()
				midFrame = true
			}
			data := f.data
			f.follow(buf[:n])
			if f.data != data {
				activity.Add(1)
			}
			// The deadline moves at most once per slack, not per read: a
			// deadline set is a timer update in the runtime's poller.
			if want := time.Now().Add(cfg.WriteTimeout); want.Sub(writeDeadline) > wire.Slack(cfg.WriteTimeout) {
				writeDeadline = want
				_ = client.SetWriteDeadline(want) // fails only once closed; its I/O then says why
			}
			_, werr := client.Write(buf[:n])
			if f.AtBoundary() {
				cw.Unlock()
				midFrame = false
			}
			if werr != nil {
				break // the client is gone; nothing to tell it
			}
			res.BytesDown += uint64(n)
		}
		if err != nil {
			if wire.IsTimeout(err) && stopping.Load() {
				mu.Lock()
				woken := !graceArmed
				mu.Unlock()
				if woken {
					continue
				}
			}
			readErr = err
			break
		}
	}
	if legacy {
		// Nothing more is written down here, so a ping can no longer
		// land inside a frame; cw stays the up copier's for its pongs
		// (one stuck on a client that reads nothing must not hold the
		// close below).
		stopPings()
		if readErr != nil && ctx.Err() == nil && f.cutBeforeStatus(protocol) {
			// The runtime ended a v4 session without its status, which
			// a v4 runtime always sends, success included: the client
			// must not read the bare close as success.
			res.RuntimeLost = true
			cw.Lock()
			_ = client.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout)) // fails only once closed; its I/O then says why
			if _, err := client.Write(wire.ServerFrame(nil, websocket.BinaryMessage, wire.StatusFrame(wire.InternalError(runtimeEndedMsg)))); err != nil {
				klog.FromContext(ctx).V(3).Info("Telling the client the runtime ended the session failed", "err", err)
			}
			cw.Unlock()
		}
		_ = upgrade.CloseWrite(client)                                               // the peer is gone already if it fails
		_ = rt.Close()                                                               // done with it: a failed close changes nothing
		_ = client.SetReadDeadline(time.Now().Add(cfg.PingPeriod + cfg.PongTimeout)) // fails only once closed; its I/O then says why
		res.BytesUp = <-upDone
		closeBoth()
		return res
	}
	if !midFrame {
		cw.Lock() // no ping may land inside the end frames written below
		midFrame = true
	}
	stopPings()
	if readErr != nil && !f.sawClose {
		msg := "session cancelled: the node's streaming server is shutting down"
		switch {
		case idled.Load() && ctx.Err() == nil:
			res.IdleTimeout = true
			msg = fmt.Sprintf("session idle for %s, closed by the node", cfg.IdleTimeout)
		case ctx.Err() == nil:
			res.RuntimeLost = true
			msg = "container runtime connection lost"
			if !errors.Is(readErr, io.EOF) {
				msg += ": " + readErr.Error()
			}
		}
		if f.AtBoundary() {
			_ = client.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout)) // fails only once closed; its I/O then says why
			_, _ = client.Write(endFrames(protocol, msg))                 // the last words: a client that cannot take them is gone
		}
	}
	// The client gets the liveness window, not CloseGrace, to answer: a
	// slow reader behind the apiserver reaches the close frame only after
	// reading everything before it, pinging all the while, and closing
	// on those pings would make the kernel reset what the apiserver still
	// holds for it (bench-node's slow reader).
	_ = upgrade.CloseWrite(client) // the peer is gone already if it fails
	timer := time.AfterFunc(cfg.PingPeriod+cfg.PongTimeout, closeBoth)
	res.BytesUp = <-upDone
	timer.Stop()
	closeBoth()
	res.Status = f.lastStatus()
	return res
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
	var frames frameFollower // what is data, for the idle timeout: kubectl's pings are not
	for {
		n, err := client.Read(buf)
		if n > 0 {
			data := frames.data
			frames.follow(buf[:n])
			if frames.data != data {
				activity.Add(1)
			}
		}
		if n > 0 && cf != nil {
			cf.follow(buf[:n])
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
	br := bufio.NewReaderSize(client, wire.ReadBufSize)
	buf := make([]byte, max(size, wire.MaxHeader+wire.MaxControl))
	var up uint64
	rtGone := false
	forward := func(b []byte) {
		if cf != nil {
			cf.follow(b) // before the write: b is still masked, as read
		}
		if rtGone {
			return
		}
		if _, err := rt.Write(b); err != nil {
			rtGone = true // read the client on to its end all the same
			return
		}
		up += uint64(len(b))
	}
	defer upgrade.CloseWrite(rt)
	for {
		b, err := br.Peek(2)
		if err != nil {
			return up
		}
		hlen := wire.HeaderLen(b[1])
		h := buf[:hlen]
		if _, err := io.ReadFull(br, h); err != nil {
			return up
		}
		hd := wire.DecodeHeader(h)
		n := hd.Len
		if hd.Op == websocket.PingMessage && hd.Fin && n <= wire.MaxControl && hd.Masked {
			payload := buf[hlen : hlen+int(n)]
			if _, err := io.ReadFull(br, payload); err != nil {
				return up
			}
			wire.Unmask(hd.Key, 0, payload)
			pong := wire.ServerFrame(nil, websocket.PongMessage, payload)
			cw.Lock()
			_, _ = client.Write(pong) // a failed pong is the next read's error to find
			cw.Unlock()
			continue
		}
		forward(h)
		for rem := n; rem > 0; {
			k, err := br.Read(buf[:min(rem, uint64(len(buf)))])
			forward(buf[:k])
			rem -= uint64(k)
			if err != nil {
				return up
			}
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
	wire.Follower
	sawClose bool
	data     uint64 // data frames' payload bytes so far

	// For the binary channel protocols (v5, v4.channel.k8s.io), the error
	// channel's last message is kept (the audit record's exit code), in a
	// fixed array, so an idle session allocates nothing for it and the
	// follower stays comparable (FuzzFrameFollowers); output goes to obs.
	channels  bool
	obs       Observer
	atPayload bool // the next payload byte is a data frame's first (its channel)
	channel   byte // the current message's channel
	control   bool // the current frame is a control frame (ping, pong, close)
	status    [statusMax]byte
	statusLen int // -1: the last status did not fit
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
		h, header, payload, rest := f.Next(b)
		b = rest
		if !header {
			f.keep(payload)
			if !f.control {
				f.data += uint64(len(payload))
			}
			continue
		}
		if h.Op == websocket.CloseMessage {
			f.sawClose = true
		}
		// A data frame's payload opens with its channel; a continuation
		// goes on with the message it continues. Control frames (which
		// may come between a message's fragments) are no part of it.
		f.control = h.Op >= websocket.CloseMessage
		if h.Op == websocket.BinaryMessage || h.Op == websocket.TextMessage {
			f.atPayload, f.channel = h.Len > 0, noChannel
		}
	}
}
