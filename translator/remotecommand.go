package translator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/internal/wire"
)

// Options are the streams of a remotecommand session. They must match the
// CRI request the runtime URL was issued for: the runtime waits for exactly
// these streams. The type is cri-streaming's, as the kubelet API request
// and the CRI request use it.
type Options = remotecommandserver.Options

// Channels of the v5 protocol, by index into Result.Bytes.
const (
	ChanStdin  = remotecommand.StreamStdIn
	ChanStdout = remotecommand.StreamStdOut
	ChanStderr = remotecommand.StreamStdErr
	ChanError  = remotecommand.StreamErr
	ChanResize = remotecommand.StreamResize
	chanClose  = remotecommand.StreamClose
)

// Result describes a finished session for logs and metrics.
type Result struct {
	// Status is what the client was sent on the error channel, nil if the
	// client went away first.
	Status *metav1.Status
	// Bytes counts payload bytes by v5 channel (stdin..resize).
	Bytes [5]uint64
	// Err is why the session ended abnormally: the client vanished or broke
	// the protocol, or the runtime leg failed.
	Err error
	// NodeEnded: the node ended the session itself (idle timeout,
	// shutdown) and told the client so.
	NodeEnded bool
}

// ProtocolError is a client's breach of the v5 protocol.
type ProtocolError = wire.ProtocolError

// DialFunc opens a new upgraded connection to the runtime offering protocols
// and returns it with the protocol the runtime chose. CRI streaming URLs are
// single-use, so each call must come with a fresh URL.
type DialFunc func(ctx context.Context, protocols []string) (net.Conn, string, error)

// RuntimeProtocol is what kubestream speaks to runtimes: v4 is the newest
// SPDY remotecommand protocol, the one with JSON status and exit codes.
const RuntimeProtocol = remotecommand.StreamProtocolV4Name

type rcSession struct {
	logger klog.Logger
	cfg    *Config
	obs    Observer // nil: none
	opts   Options
	wc     *wire.Conn
	rt     *spdyConn

	// Stream IDs on the runtime connection; 0 when not requested.
	errID, stdinID, stdoutID, stderrID, resizeID uint32
	// Runtime streams still open (by ID): the session's output is complete
	// when none of error, stdout and stderr is.
	open map[uint32]bool

	bytes   [5]atomic.Uint64
	writing bool   // the client still takes output (pump goroutine only)
	status  []byte // what the runtime wrote on the error stream
}

// ServeRemoteCommand translates one v5 session: ws is the client's upgraded
// WebSocket, dial opens the runtime's SPDY leg. It returns when both sides
// are closed and every goroutine it started has ended: two per session, the
// caller's (client to runtime) and one reading the runtime.
func ServeRemoteCommand(ctx context.Context, ws *websocket.Conn, dial DialFunc, opts Options, cfg Config, obs Observer) Result {
	s := &rcSession{
		logger:  klog.FromContext(ctx),
		cfg:     &cfg,
		obs:     obs,
		opts:    opts,
		wc:      wire.NewConn(ws, &cfg.Limits),
		open:    map[uint32]bool{},
		writing: true,
	}
	defer s.wc.Shutdown()

	if err := s.openRuntime(ctx, dial); err != nil {
		st := wire.InternalError(err.Error())
		var ue *upgrade.Error
		if errors.As(err, &ue) && ue.StatusCode < 500 {
			st.Code = int32(ue.StatusCode)
		}
		s.wc.CloseWith(wire.StatusFrame(st), websocket.CloseNormalClosure, "")
		s.wc.Drain()
		return Result{Status: st, Err: err}
	}
	defer s.rt.Close()

	// Upstream tells the client the session is up with an empty message on
	// the lowest output channel; some clients wait for it.
	ready := []byte{ChanError}
	if opts.Stdout {
		ready[0] = ChanStdout
	} else if opts.Stderr {
		ready[0] = ChanStderr
	}
	_ = s.wc.WriteFrame(ready) // a client gone already is found by the reader below

	var res Result
	outputsDone := make(chan struct{})
	go func() {
		defer close(outputsDone)
		res.Status = s.pumpOutputs()
	}()
	var nodeEnded atomic.Bool // set on the timer's or the context's goroutine
	stop := context.AfterFunc(ctx, func() {
		nodeEnded.Store(true)
		s.abort(wire.InternalError("session cancelled: " + stopMessage(ctx)))
	})
	defer stop()
	s.wc.StartKeepalive(func() { _ = s.rt.ping() /* a broken runtime leg ends its reader */ }, func() {
		s.logger.V(2).Info("Closing idle session", "idleTimeout", cfg.IdleTimeout)
		nodeEnded.Store(true)
		s.abort(wire.InternalError(fmt.Sprintf("session idle for %s, closed by the node", cfg.IdleTimeout)))
	})

	readErr := s.readLoop()
	var pe *ProtocolError
	switch {
	case errors.As(readErr, &pe):
		s.abort(wire.BadRequest(pe.Error()))
		s.wc.Drain()
		res.Err = readErr
	case errors.Is(readErr, wire.ErrProtocol):
		// The reader already sent close 1002; the runtime leg must end
		// too, or a broken frame would hold it (and its process) open.
		s.abort(nil)
		s.wc.Drain()
		res.Err = fmt.Errorf("client broke websocket framing: %w", readErr)
	case errors.Is(readErr, websocket.ErrReadLimit):
		// The reader already sent close 1009 to the client.
		s.abort(nil)
		s.wc.Drain()
		res.Err = fmt.Errorf("client message larger than %d bytes: %w", cfg.MaxMessageSize, readErr)
	case !s.wc.Closed():
		// The client left (close frame, reset or silence) while the
		// command still ran: stop the runtime side.
		s.abort(nil)
		res.Err = fmt.Errorf("client went away: %w", readErr)
	}
	<-outputsDone
	for i := range res.Bytes {
		res.Bytes[i] = s.bytes[i].Load()
	}
	res.NodeEnded = nodeEnded.Load()
	return res
}

// abort ends the session from the client side of things: the client gets st
// (if it is still there) and the runtime connection is cut, which ends the
// output pump.
func (s *rcSession) abort(st *metav1.Status) {
	var frame []byte
	if st != nil {
		frame = wire.StatusFrame(st)
	}
	s.wc.CloseWith(frame, websocket.CloseNormalClosure, "")
	s.rt.Close()
}

// openRuntime dials the runtime, opens the streams the CRI request named
// (error first, as client-go does) in one burst and waits for the replies.
func (s *rcSession) openRuntime(ctx context.Context, dial DialFunc) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StreamCreationTimeout)
	defer cancel()
	conn, proto, err := dial(ctx, []string{RuntimeProtocol})
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("container runtime did not answer within the stream creation timeout (%s): %w", s.cfg.StreamCreationTimeout, err)
		}
		return err
	}
	if proto != RuntimeProtocol {
		conn.Close()
		return fmt.Errorf("container runtime negotiated %q, kubestream needs %q", proto, RuntimeProtocol)
	}
	s.rt = newSPDYConn(conn)
	// The timeout must also cut short a blocked write or a missing reply.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	err = s.createStreams()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("container runtime did not create the streams within the stream creation timeout (%s)", s.cfg.StreamCreationTimeout)
	} else if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("creating streams with container runtime: %w", ctx.Err())
	}
	if err != nil {
		conn.Close()
		return err
	}
	return nil
}

func (s *rcSession) createStreams() error {
	type want struct {
		on   bool
		kind string
		id   *uint32
	}
	pending := map[uint32]string{}
	for _, w := range []want{
		{true, "error", &s.errID},
		{s.opts.Stdin, "stdin", &s.stdinID},
		{s.opts.Stdout, "stdout", &s.stdoutID},
		{s.opts.Stderr, "stderr", &s.stderrID},
		{s.opts.TTY, "resize", &s.resizeID},
	} {
		if !w.on {
			continue
		}
		id, err := s.rt.synStream("streamtype", w.kind)
		if err != nil {
			return fmt.Errorf("creating %s stream with container runtime: %w", w.kind, err)
		}
		*w.id = id
		pending[id] = w.kind
	}
	for _, id := range []uint32{s.errID, s.stdoutID, s.stderrID} {
		if id != 0 {
			s.open[id] = true
		}
	}
	for len(pending) > 0 {
		f, err := s.rt.next()
		if err != nil {
			return fmt.Errorf("waiting for the container runtime to accept the streams: %w", err)
		}
		switch {
		case f.control && f.typ == spdy.TypeSynReply:
			delete(pending, f.id)
		case f.control && f.typ == spdy.TypeRstStream && pending[f.id] != "":
			return fmt.Errorf("container runtime rejected the %s stream", pending[f.id])
		case !f.control:
			// Runtimes built on cri-streaming send output only after all
			// replies; any other order is still valid SPDY.
			if err := s.forward(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// pumpOutputs reads the runtime connection until the runtime has closed
// the error, stdout and stderr streams (or the connection), writing output
// to the client as it comes, then forwards the runtime's status. One reader
// keeps the runtime's frame order: every output byte is on the wire before
// the status, and the client stops reading output once it has the status.
func (s *rcSession) pumpOutputs() *metav1.Status {
	for len(s.open) > 0 {
		f, err := s.rt.next()
		if err == nil {
			err = s.forward(f)
		}
		if err != nil {
			if !errors.Is(err, errGoAway) && !s.wc.Closed() {
				s.logger.V(3).Info("Runtime connection ended", "err", err)
			}
			break
		}
	}
	st, frame := parseRuntimeStatus(s.status)
	if !s.wc.CloseWith(frame, websocket.CloseNormalClosure, "") {
		return nil // the client side ended first; it has had its answer
	}
	return st
}

// forward acts on one frame from the runtime.
func (s *rcSession) forward(f frame) error {
	if f.control { // a reset: the runtime is done with that stream
		delete(s.open, f.id)
		return nil
	}
	var err error
	switch f.id {
	case s.stdoutID:
		err = s.output(ChanStdout, f.id, f.length)
	case s.stderrID:
		err = s.output(ChanStderr, f.id, f.length)
	case s.errID:
		err = s.readStatus(f.length)
	default:
		err = s.rt.discard()
	}
	if f.flags&spdy.FlagFin != 0 {
		delete(s.open, f.id)
	}
	return err
}

// output copies a data frame's payload to the client on channel ch, read
// straight into a v5 frame behind the channel byte. Once the client cannot
// take output the payload is still read, so the runtime never blocks on us.
//
// Frames of the same stream that have already arrived behind this one go
// into the same message, up to BufferSize: a runtime cuts output as the
// process wrote it (containerd: one SPDY frame per read of the container's
// pipe, often a few KiB), and each message is a TLS record and a write
// system call on the client leg, the dearest per-frame cost a node pays.
// Only frames whose header is already staged are joined, so no output waits
// for more to come.
func (s *rcSession) output(ch byte, id uint32, length int) error {
	if length == 0 {
		return nil
	}
	// Room in front takes the message's frame header (WriteInPlace);
	// spare room behind the payload lets the runtime reader take the next
	// frame's header in the same read (see readPayload).
	bp := wire.GetBuf(wire.Headroom + 1 + s.cfg.BufferSize + wire.ReadBufSize)
	defer wire.PutBuf(bp)
	msg := *bp
	buf := msg[wire.Headroom:]
	buf[0] = ch
	for rem := length; rem > 0; {
		n := min(rem, s.cfg.BufferSize)
		if err := s.rt.readPayload(buf[1 : 1+n]); err != nil {
			return err
		}
		rem -= n
		for rem == 0 && n < s.cfg.BufferSize {
			more, ok := s.rt.nextDataStaged(id, s.cfg.BufferSize-n)
			if !ok {
				break
			}
			if err := s.rt.readPayload(buf[1+n : 1+n+more]); err != nil {
				return err
			}
			n += more
		}
		if !s.writing {
			continue
		}
		if werr := s.wc.WriteInPlace(msg[:wire.Headroom+1+n]); werr != nil {
			s.writing = false
			if !errors.Is(werr, wire.ErrSessionClosed) {
				// The client cannot take output: the session is over.
				s.logger.V(3).Info("Writing to client failed", "channel", ch, "err", werr)
				s.wc.CloseWith(nil, websocket.CloseGoingAway, "")
				s.rt.Close()
			}
			continue
		}
		s.bytes[ch].Add(uint64(n))
		if s.obs != nil {
			s.obs.Output(ch, buf[1:1+n])
		}
	}
	return nil
}

// readStatus appends error-stream data, keeping at most 64 KiB.
func (s *rcSession) readStatus(n int) error {
	keep := min(n, 64*1024-len(s.status))
	if keep > 0 {
		s.status = append(s.status, make([]byte, keep)...)
		if err := s.rt.readPayload(s.status[len(s.status)-keep : len(s.status) : len(s.status)]); err != nil {
			return err
		}
	}
	return s.rt.discard()
}

// readLoop carries the client's messages (wire.V5Reader decides what each
// asks) to the runtime until the client's side ends or breaks v5.
func (s *rcSession) readLoop() error {
	in := wire.NewV5Reader(s.wc, s.stdinID != 0, s.resizeID != 0)
	for {
		m, err := in.Next()
		if err != nil {
			return err
		}
		if err := s.carry(m); err != nil {
			return err
		}
	}
}

// carry hands one client message to the runtime.
func (s *rcSession) carry(m wire.V5Message) error {
	switch {
	case m.Stdin != nil:
		// Room for a SPDY data frame header in front of the payload, so
		// client bytes go to the runtime without a copy, and spare room
		// behind a full message for the reader to read on into the next
		// frame's header (one read syscall per message, not two).
		bp := wire.GetBuf(spdy.HeaderLen + s.cfg.BufferSize + wire.ReadBufSize)
		defer wire.PutBuf(bp)
		return s.copyIn(m.Stdin, s.stdinID, *bp, ChanStdin)
	case m.CloseStdin:
		// A SPDY FIN: the runtime's process sees EOF on stdin.
		if err := s.rt.finish(s.stdinID); err != nil {
			s.logger.V(4).Info("Half-closing runtime stdin", "err", err)
		}
	case m.CloseResize:
		_ = s.rt.finish(s.resizeID) // resizes are advisory: a runtime that cannot take the FIN loses nothing
	default:
		s.resize(m.Sizes, m.ResizeBytes)
	}
	return nil
}

func (s *rcSession) copyIn(r io.Reader, id uint32, buf []byte, ch byte) error {
	for {
		// Whole pieces (wire.ReadStdin): each write is a syscall and a
		// SPDY frame.
		n, end, err := wire.ReadStdin(r, buf[spdy.HeaderLen:])
		if err != nil {
			return err // the message was cut off (or broke): none of it goes on
		}
		if n > 0 {
			if werr := s.rt.writeData(id, buf[:spdy.HeaderLen+n], false); werr != nil {
				// The runtime stopped taking input (the process exited); the
				// status will follow. Keep reading the client.
				s.logger.V(4).Info("Runtime refused input", "channel", ch, "err", werr)
			}
			s.bytes[ch].Add(uint64(n))
			if s.obs != nil {
				s.obs.Input(buf[spdy.HeaderLen : spdy.HeaderLen+n])
			}
		}
		if end {
			return nil
		}
	}
}

// resize hands each size a client's resize message completed to the
// runtime's resize stream.
func (s *rcSession) resize(sizes []wire.TerminalSize, n int) {
	s.bytes[ChanResize].Add(uint64(n))
	for _, size := range sizes {
		if s.obs != nil {
			s.obs.Resize(size.Width, size.Height)
		}
		out, _ := json.Marshal(size)
		frame := append(make([]byte, spdy.HeaderLen, spdy.HeaderLen+len(out)), out...)
		if err := s.rt.writeData(s.resizeID, frame, false); err != nil {
			s.logger.V(4).Info("Runtime refused resize", "err", err)
		}
	}
}
