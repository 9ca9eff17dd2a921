package wire

import (
	"crypto/tls"
	"errors"
	"io"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// Limits are what a Conn enforces; the translator's and the runtime
// server's configurations each hold one.
type Limits struct {
	// IdleTimeout ends a session after this long without data in either
	// direction (0: never).
	IdleTimeout time.Duration
	// PingPeriod is how often the peer is pinged; PongTimeout how long
	// after a ping period without any frame from it the peer is taken as
	// dead.
	PingPeriod  time.Duration
	PongTimeout time.Duration
	// WriteTimeout bounds one write to the peer.
	WriteTimeout time.Duration
	// CloseGrace bounds the wait for the peer's close reply.
	CloseGrace time.Duration
	// MaxMessageSize is the largest message accepted; a larger one ends
	// the session with close code 1009.
	MaxMessageSize int
}

// DefaultLimits are the kubelet's streaming defaults, the one place both
// ends take them from: no idle end before 4 h (its
// --streaming-connection-idle-timeout), a ping every 30 s, a peer silent
// for 90 s gone, 10 s per write (upstream writes the status with a 10 s
// deadline), 5 s for the peer's close reply, 1 MiB messages.
var DefaultLimits = Limits{
	IdleTimeout:    4 * time.Hour,
	PingPeriod:     30 * time.Second,
	PongTimeout:    60 * time.Second,
	WriteTimeout:   10 * time.Second,
	CloseGrace:     5 * time.Second,
	MaxMessageSize: 1 << 20,
}

// DefaultBufferSize is a copy buffer's size: with MaxMessageSize it bounds
// a session's memory.
const DefaultBufferSize = 32 << 10

// WithDefaults is l with each zero field (IdleTimeout aside: 0 is never)
// taken from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	for _, f := range []struct{ v, d *time.Duration }{
		{&l.PingPeriod, &d.PingPeriod}, {&l.PongTimeout, &d.PongTimeout},
		{&l.WriteTimeout, &d.WriteTimeout}, {&l.CloseGrace, &d.CloseGrace},
	} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	if l.MaxMessageSize <= 0 {
		l.MaxMessageSize = d.MaxMessageSize
	}
	return l
}

// ErrSessionClosed is returned by writes after the session sent its close frame.
var ErrSessionClosed = errors.New("websocket session already closed")

// Conn owns one WebSocket connection after gorilla's handshake: gorilla
// does the handshake alone, and from then on every byte is read and written
// here (gorilla's own reads and writes are never mixed in, as its contract
// requires). Conn serialises the writes and owns the end of the session: a
// status, a close frame, a bounded wait for the peer's close, then the TCP
// close. Ending with a bare
// TCP close while the peer still has unread data makes its kernel answer the
// peer's next ping with a reset and lose that data (upstream's translator
// v0.37 does this after its status: a slow reader loses output), so every
// end goes through CloseWith.
type Conn struct {
	nc  net.Conn // the upgraded connection, gorilla done with it
	cfg *Limits

	mu sync.Mutex // guards writes, and the setting of closed

	// activity counts reads of client payload and writes of data frames;
	// the keepalive timer compares it between ticks to find idle sessions
	// without a clock read per frame.
	activity atomic.Uint64
	// closed: a close frame was sent (or the connection shut); no more
	// data frames. Set under mu, read with or without it.
	closed atomic.Bool
	shut   atomic.Bool // Shutdown ran: the grace's timers stop

	timer *time.Timer

	// Deadlines are moved at most once a second: setting one costs a
	// timer update in the runtime poller, too much to pay per frame for a
	// limit measured in seconds.
	rdmu          sync.Mutex // guards readDeadline; apart from mu so a slow write never stalls reading
	readDeadline  time.Time
	writeDeadline time.Time // under mu

	rd readState // the read side (read.go), the read loop's alone

	src   io.Reader // what every byte after the handshake is read from (newSource)
	plain bool      // the connection is plain TCP: WriteChannel writes p as is
	hdr   []byte    // a frame's header being written, under mu
	iov   [2][]byte // writeMessage's writev, under mu
}

// Slack is how far a deadline may lag behind where it would be if moved on
// every frame: a second, or a quarter of the window when that is shorter.
func Slack(window time.Duration) time.Duration { return min(time.Second, window/4) }

// NewConn takes over the connection ws upgraded: from then on only the Conn
// reads and writes it, and ws is not used again.
func NewConn(ws *websocket.Conn, cfg *Limits) *Conn {
	nc := ws.NetConn()
	_, plain := nc.(*net.TCPConn)
	c := &Conn{nc: nc, cfg: cfg, plain: plain, src: newSource(nc)}
	c.extendReadDeadline()
	return c
}

// extendReadDeadline keeps a live peer's connection open. Once the session is
// closing the grace deadline set by CloseWith must win.
func (c *Conn) extendReadDeadline() {
	if c.closed.Load() {
		return
	}
	window := c.cfg.PingPeriod + c.cfg.PongTimeout
	want := time.Now().Add(window)
	c.rdmu.Lock()
	defer c.rdmu.Unlock()
	if !c.closed.Load() && want.Sub(c.readDeadline) > Slack(window) {
		c.readDeadline = want
		_ = c.nc.SetReadDeadline(want) // fails only once closed; its I/O then says why
	}
}

// StartKeepalive pings the client every tick (calling onTick, which keeps
// the other leg alive too) and ends the session with onIdle when no data
// frame crossed it for IdleTimeout. time.AfterFunc keeps an idle session
// free of a parked goroutine.
func (c *Conn) StartKeepalive(onTick, onIdle func()) {
	clock := NewIdleClock(time.Now())
	var tick func()
	tick = func() {
		if c.closed.Load() {
			return
		}
		now := time.Now()
		if clock.Idle(c.activity.Load(), now, c.cfg.IdleTimeout) {
			onIdle()
			return
		}
		c.writeControl(websocket.PingMessage, nil, now.Add(c.cfg.WriteTimeout))
		if onTick != nil {
			onTick()
		}
		c.mu.Lock()
		if !c.closed.Load() {
			c.timer.Reset(IdleCheckPeriod(c.cfg.IdleTimeout, c.cfg.PingPeriod))
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.timer = time.AfterFunc(IdleCheckPeriod(c.cfg.IdleTimeout, c.cfg.PingPeriod), tick)
	c.mu.Unlock()
}

// IdleClock tells whether a counter of data frames stood still for a
// timeout, checked from a timer (no parked goroutine): the keepalive's and
// the direct splice's idle timeouts.
type IdleClock struct {
	last  uint64
	since time.Time
}

// NewIdleClock starts a clock at now, with nothing counted yet.
func NewIdleClock(now time.Time) IdleClock { return IdleClock{since: now} }

// Idle records the counter's value n and reports whether it has not moved
// for timeout (0: never idle).
func (c *IdleClock) Idle(n uint64, now time.Time, timeout time.Duration) bool {
	if n != c.last {
		c.last, c.since = n, now
		return false
	}
	return timeout > 0 && now.Sub(c.since) >= timeout
}

// IdleCheckPeriod is how often an idle clock is checked: period (the ping
// period; 0 for none), or a quarter of a timeout shorter than that (at
// least 50 ms), so a session ends within a quarter of its timeout, not a
// ping period later (an 8 s timeout would otherwise fire at 30 s).
func IdleCheckPeriod(timeout, period time.Duration) time.Duration {
	if q := timeout / 4; q > 0 && (period == 0 || q < period) {
		return max(q, 50*time.Millisecond)
	}
	return period
}

// WriteFrame sends one binary message. buf must hold the channel byte at
// index 0; it is sent as is, so callers reuse one buffer and nothing is
// copied or allocated here.
func (c *Conn) WriteFrame(buf []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.beginWrite(); err != nil {
		return err
	}
	return c.writeMessage(OpBinary, nil, buf)
}

// Headroom is the room WriteInPlace needs in front of a message's payload:
// the longest header of a server's frame (no mask).
const Headroom = 10

// WriteInPlace sends b[Headroom:] as one binary message, writing the frame
// header into the room in front of it: header and payload leave in one
// write (one TLS record on a TLS connection) with no copy, on the hottest
// path a node has (output on its way to the apiserver). b[:Headroom] is
// overwritten.
func (c *Conn) WriteInPlace(b []byte) error {
	n := len(b) - Headroom
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.beginWrite(); err != nil {
		return err
	}
	c.hdr = appendHeader(c.hdr[:0], OpBinary, n)
	start := Headroom - len(c.hdr)
	copy(b[start:], c.hdr)
	_, err := c.nc.Write(b[start:])
	return err
}

// beginWrite (mu held) refuses data after the close frame, moves the write
// deadline at most once per Slack, and counts the write as activity.
func (c *Conn) beginWrite() error {
	if c.closed.Load() {
		return ErrSessionClosed
	}
	if want := time.Now().Add(c.cfg.WriteTimeout); want.Sub(c.writeDeadline) > Slack(c.cfg.WriteTimeout) {
		c.writeDeadline = want
		if err := c.nc.SetWriteDeadline(want); err != nil {
			return err
		}
	}
	c.activity.Add(1)
	return nil
}

// writeControl sends a control frame (a pong, a close reply) under mu,
// with its own deadline.
func (c *Conn) writeControl(op int, payload []byte, deadline time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeDeadline = deadline
	if err := c.nc.SetWriteDeadline(deadline); err != nil {
		return err
	}
	return c.writeMessage(op, nil, payload)
}

// writeMessage (mu held) writes one final frame of op whose payload is
// prefix then p: on plain TCP the header and prefix from one small buffer
// and p after them in one writev, p not copied; on other connections (TLS,
// where two writes would be two records) through one pooled buffer. It is
// every write of a whole message but WriteInPlace's.
func (c *Conn) writeMessage(op int, prefix, p []byte) error {
	if !c.plain {
		c.hdr = appendHeader(c.hdr[:0], op, len(prefix)+len(p))
		n := len(c.hdr) + len(prefix) + len(p)
		// Power-of-two sizes, so the pools stay few whatever sizes the
		// runtime writes (GetBuf keeps one pool per size).
		bp := GetBuf(max(4096, 1<<bits.Len(uint(n-1))))
		defer PutBuf(bp)
		buf := append(append(append((*bp)[:0], c.hdr...), prefix...), p...)
		_, err := c.nc.Write(buf)
		return err
	}
	c.hdr = appendHeader(c.hdr[:0], op, len(prefix)+len(p))
	c.hdr = append(c.hdr, prefix...)
	c.iov[0], c.iov[1] = c.hdr, p
	bufs := net.Buffers(c.iov[:])
	_, err := bufs.WriteTo(c.nc)
	c.iov[1] = nil // p is the caller's
	return err
}

// WriteChannel sends one binary message of ch followed by p (WritePrefixed).
func (c *Conn) WriteChannel(ch byte, p []byte) error {
	b := [1]byte{ch}
	return c.WritePrefixed(b[:], p)
}

// WritePrefixed sends one binary message of prefix (a few bytes: a channel
// byte, a SPDY frame header) followed by p, without copying p where the
// connection is plain TCP (writeMessage). Stdout and forwarded bytes are
// the runtime side's hottest paths.
func (c *Conn) WritePrefixed(prefix, p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.beginWrite(); err != nil {
		return err
	}
	return c.writeMessage(OpBinary, prefix, p)
}

// CloseWith writes last (if any) as the final data frame, then a close frame,
// and arms the grace deadline for the peer's close reply. It reports whether
// this call was the one that closed the session.
func (c *Conn) CloseWith(last []byte, code int, reason string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.closed.Store(true)
	if c.timer != nil {
		c.timer.Stop()
	}
	deadline := time.Now().Add(c.cfg.WriteTimeout)
	c.writeDeadline = deadline
	_ = c.nc.SetWriteDeadline(deadline) // fails only once closed; its I/O then says why
	if last != nil {
		_ = c.writeMessage(OpBinary, nil, last) // the end goes on: a peer that cannot take it is gone
	}
	_ = c.writeMessage(OpClose, nil, websocket.FormatCloseMessage(code, CloseReason(reason))) // likewise
	// The read loop sees the peer's close reply, or the grace's end. Taken
	// under rdmu, after closed is set, so no extension can undo it.
	c.rdmu.Lock()
	_ = c.nc.SetReadDeadline(time.Now().Add(c.cfg.CloseGrace)) // fails only once closed; its I/O then says why
	c.rdmu.Unlock()
	c.graceDeadline()
	return true
}

// graceDeadline moves the close grace's read deadline on while the peer is
// still reading what came before our close frame. A slow reader is not a
// dead peer: behind a proxy (the apiserver) a client reading at 1 MiB/s
// reaches our close frame half a minute after we wrote it, pinging all the
// while. Closing at CloseGrace made our kernel answer its next ping with a
// reset, and the proxy, ending both connections when ours ended, reset the
// client too, dropping what it still held for it: output lost before the
// status (bench-node's slow reader found it through kube-apiserver, 2 MB of
// 32 per session). So, checked every quarter grace:
//   - while our socket holds output the peer has not acknowledged, the
//     deadline moves on as long as that shrinks within each CloseGrace;
//   - once the peer has all of it, the connection is held open (no FIN:
//     a proxy would end the client's connection on it) until the peer's
//     close reply or its disconnect, for at most a liveness window
//     (PingPeriod + PongTimeout);
//   - a peer that takes nothing for CloseGrace is closed on, as before.
//
// Where the kernel cannot tell (not Linux, not TCP) the grace is
// CloseGrace alone. A time.AfterFunc chain, no goroutine, ends with the
// read side (Shutdown) or the grace.
func (c *Conn) graceDeadline() {
	tcp := rawTCP(c.nc)
	if tcp == nil {
		return
	}
	queued, progress := unacked(tcp), time.Now()
	if queued < 0 {
		return
	}
	step := max(c.cfg.CloseGrace/4, time.Millisecond)
	window := c.cfg.PingPeriod + c.cfg.PongTimeout
	var emptySince time.Time
	var tick func()
	tick = func() {
		if c.shut.Load() {
			return
		}
		now := time.Now()
		q := unacked(tcp)
		if q < queued {
			progress = now
		}
		queued = q
		if q == 0 && emptySince.IsZero() {
			emptySince = now
		}
		live := now.Sub(progress) < c.cfg.CloseGrace
		if q == 0 {
			live = now.Sub(emptySince) < window
		}
		if !live {
			return // the deadline last set runs out
		}
		c.rdmu.Lock()
		_ = c.nc.SetReadDeadline(now.Add(c.cfg.CloseGrace)) // fails only once closed; its I/O then says why
		c.rdmu.Unlock()
		time.AfterFunc(step, tick)
	}
	time.AfterFunc(step, tick)
}

// rawTCP is the TCP connection under conn (and its TLS), or nil.
func rawTCP(conn net.Conn) *net.TCPConn {
	if t, ok := conn.(*tls.Conn); ok {
		conn = t.NetConn()
	}
	tcp, _ := conn.(*net.TCPConn)
	return tcp
}

// Drain discards what the peer still sends until its close frame, its
// disconnect or the grace deadline CloseWith set, whichever is first, so
// closing the socket cannot reset data the peer has yet to read (our status
// and close frame among it). After the read limit trips, or the framing
// broke, messages cannot be told apart any more, so the raw connection is
// drained instead. The grace is graceDeadline's: longer for a peer that
// is still taking our output.
func (c *Conn) Drain() {
	for {
		_, _, err := c.NextReader()
		if err == nil {
			continue
		}
		if errors.Is(err, websocket.ErrReadLimit) || errors.Is(err, ErrProtocol) {
			_, _ = io.Copy(io.Discard, c.nc) // draining until the peer goes: its error is that end
		}
		return
	}
}

// Shutdown closes the TCP connection after the read loop ended or the grace
// period passed, whichever is first.
func (c *Conn) Shutdown() {
	c.shut.Store(true)
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.closed.Store(true)
	c.mu.Unlock()
	_ = c.nc.Close() // done with it: a failed close changes nothing
}

// Closed reports whether the session sent its close frame: from then on
// only the peer's close, or the grace, is awaited.
func (c *Conn) Closed() bool { return c.closed.Load() }

// CloseReason cuts a close frame's reason to what a control frame can carry
// (125 bytes, 2 of them the code) at a UTF-8 boundary, so the peer's
// reader, which must check it is UTF-8, does not fail on our own cut.
func CloseReason(reason string) string {
	const max = 123
	if len(reason) <= max {
		return reason
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut]
}

// IsTimeout reports whether err is a deadline's timeout (a net.Error's).
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// PeerClosed reports whether a read error is the peer's close frame (a
// normal end), as opposed to a broken connection.
func PeerClosed(err error) bool {
	var ce *websocket.CloseError
	return errors.As(err, &ce)
}
