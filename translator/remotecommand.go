package translator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// Options are the streams of a remotecommand session. They must match the
// CRI request the runtime URL was issued for: the runtime waits for exactly
// these streams.
type Options struct {
	Stdin, Stdout, Stderr, TTY bool
}

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
}

// ProtocolError is a client's breach of the v5 protocol.
type ProtocolError struct{ msg string }

func (e *ProtocolError) Error() string { return "v5 protocol error: " + e.msg }

func protoErrf(format string, a ...any) error {
	return &ProtocolError{msg: fmt.Sprintf(format, a...)}
}

// RuntimeProtocol is what kubestream speaks to runtimes: v4 is the newest
// SPDY remotecommand protocol, the one with JSON status and exit codes.
const RuntimeProtocol = remotecommand.StreamProtocolV4Name

type rcSession struct {
	logger klog.Logger
	cfg    *Config
	opts   Options
	wc     *wsConn

	raw                                    net.Conn // the runtime leg's TCP connection
	rt                                     httpstream.Connection
	errStream, stdin, stdout, stderr, size httpstream.Stream

	bytes     [5]atomic.Uint64
	stdinOpen bool
}

// ServeRemoteCommand translates one v5 session: ws is the client's upgraded
// WebSocket, dial opens the runtime's SPDY leg. It returns when both sides
// are closed and every goroutine it started has ended.
func ServeRemoteCommand(ctx context.Context, ws *websocket.Conn, dial DialFunc, opts Options, cfg Config) Result {
	s := &rcSession{
		logger: klog.FromContext(ctx),
		cfg:    &cfg,
		opts:   opts,
		wc:     newWSConn(ws, &cfg),
	}
	defer s.wc.shutdown()

	if err := s.openRuntime(ctx, dial); err != nil {
		st := internalError(err.Error())
		var ue *UpgradeError
		if errors.As(err, &ue) && ue.StatusCode < 500 {
			st.Code = int32(ue.StatusCode)
		}
		s.wc.closeWith(statusFrame(st), websocket.CloseNormalClosure, "")
		s.drainUntilClosed()
		return Result{Status: st, Err: err}
	}
	defer s.closeRuntime()

	// Upstream tells the client the session is up with an empty message on
	// the lowest output channel; some clients wait for it.
	ready := []byte{ChanError}
	if opts.Stdout {
		ready[0] = ChanStdout
	} else if opts.Stderr {
		ready[0] = ChanStderr
	}
	_ = s.wc.writeFrame(ready)

	var res Result
	outputsDone := make(chan struct{})
	go func() {
		defer close(outputsDone)
		res.Status = s.pumpOutputs()
	}()
	stop := context.AfterFunc(ctx, func() {
		s.abort(internalError("session cancelled: the node's streaming server is shutting down"))
	})
	defer stop()
	s.wc.startKeepalive(func() {
		s.logger.V(2).Info("Closing idle session", "idleTimeout", cfg.IdleTimeout)
		s.abort(internalError(fmt.Sprintf("session idle for %s, closed by the node", cfg.IdleTimeout)))
	})

	readErr := s.readLoop()
	var pe *ProtocolError
	switch {
	case errors.As(readErr, &pe):
		s.abort(badRequest(pe.Error()))
		res.Err = readErr
	case errors.Is(readErr, websocket.ErrReadLimit):
		// gorilla already sent close 1009 to the client.
		s.abort(nil)
		res.Err = fmt.Errorf("client message larger than %d bytes: %w", cfg.MaxMessageSize, readErr)
	case !s.wc.finished.Load():
		// The client left (close frame, reset or silence) while the
		// command still ran: stop the runtime side.
		s.abort(nil)
		res.Err = fmt.Errorf("client went away: %w", readErr)
	}
	<-outputsDone
	for i := range res.Bytes {
		res.Bytes[i] = s.bytes[i].Load()
	}
	return res
}

// abort ends the session from the client side of things: the client gets st
// (if it is still there) and the runtime leg is closed, which ends the
// output pumps.
func (s *rcSession) abort(st *metav1.Status) {
	var frame []byte
	if st != nil {
		frame = statusFrame(st)
	}
	s.wc.closeWith(frame, websocket.CloseNormalClosure, "")
	s.closeRuntime()
}

// closeRuntime cuts the runtime leg. The TCP connection goes first: a SPDY
// close writes frames, and a runtime that stopped reading would block it.
func (s *rcSession) closeRuntime() {
	s.raw.Close()
	s.rt.Close()
}

// drainUntilClosed reads (and drops) client messages until its close reply
// or the grace deadline, so the close handshake completes.
func (s *rcSession) drainUntilClosed() {
	for {
		if _, _, err := s.wc.ws.NextReader(); err != nil {
			return
		}
	}
}

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
	s.raw = conn
	s.rt, err = spdy.NewClientConnectionWithPings(conn, s.cfg.RuntimePingPeriod)
	if err != nil {
		conn.Close()
		return fmt.Errorf("starting SPDY session with container runtime: %w", err)
	}
	// CreateStream waits for the runtime's reply; the timeout must cut that
	// wait (or a blocked frame write) short too.
	stop := context.AfterFunc(ctx, s.closeRuntime)
	defer stop()
	create := func(kind string) (httpstream.Stream, error) {
		h := http.Header{}
		h.Set("streamType", kind)
		st, err := s.rt.CreateStream(h)
		if err != nil {
			return nil, fmt.Errorf("creating %s stream with container runtime: %w", kind, err)
		}
		return st, nil
	}
	// The order is client-go's: error first, so a runtime can always report.
	s.errStream, err = create("error")
	if err == nil && s.opts.Stdin {
		s.stdin, err = create("stdin")
		s.stdinOpen = err == nil
	}
	if err == nil && s.opts.Stdout {
		s.stdout, err = create("stdout")
	}
	if err == nil && s.opts.Stderr {
		s.stderr, err = create("stderr")
	}
	if err == nil && s.opts.TTY {
		s.size, err = create("resize")
	}
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("container runtime did not create the streams within the stream creation timeout (%s)", s.cfg.StreamCreationTimeout)
	} else if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("creating streams with container runtime: %w", ctx.Err())
	}
	if err != nil {
		s.closeRuntime()
		return err
	}
	return nil
}

// pumpOutputs copies stdout and stderr to the client until the runtime
// closes them, then forwards the runtime's status. The status goes last, so
// every output byte is on the wire before it: the client stops reading
// output once it has the status.
func (s *rcSession) pumpOutputs() *metav1.Status {
	var wg sync.WaitGroup
	if s.stderr != nil && s.stdout != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.pump(s.stderr, ChanStderr)
		}()
	}
	switch {
	case s.stdout != nil:
		s.pump(s.stdout, ChanStdout)
	case s.stderr != nil:
		s.pump(s.stderr, ChanStderr)
	}
	wg.Wait()

	raw, err := io.ReadAll(io.LimitReader(s.errStream, 64*1024))
	if err != nil && !s.wc.finished.Load() {
		s.logger.V(3).Info("Reading runtime status", "err", err)
	}
	st, frame := parseRuntimeStatus(raw)
	if !s.wc.closeWith(frame, websocket.CloseNormalClosure, "") {
		return nil // the client side ended first; it has had its answer
	}
	return st
}

// pump copies one runtime output stream into v5 frames. It keeps reading
// after the client is gone so the runtime is never blocked on us.
func (s *rcSession) pump(src io.Reader, ch byte) {
	buf := make([]byte, 1+s.cfg.BufferSize)
	buf[0] = ch
	writing := true
	for {
		n, err := src.Read(buf[1:])
		if n > 0 && writing {
			if werr := s.wc.writeFrame(buf[:1+n]); werr != nil {
				writing = false
				if !errors.Is(werr, errSessionClosed) {
					// The client cannot take output: the session is over.
					s.logger.V(3).Info("Writing to client failed", "channel", ch, "err", werr)
					s.wc.closeWith(nil, websocket.CloseGoingAway, "")
					s.closeRuntime()
				}
			} else {
				s.bytes[ch].Add(uint64(n))
			}
		}
		if err != nil {
			return
		}
	}
}

// readLoop carries client frames to the runtime until the client closes,
// the connection breaks or the client breaks the protocol.
func (s *rcSession) readLoop() error {
	defer close(s.wc.readDone)
	buf := make([]byte, s.cfg.BufferSize)
	for {
		mt, r, err := s.wc.ws.NextReader()
		if err != nil {
			return err
		}
		s.wc.extendReadDeadline()
		if mt != websocket.BinaryMessage {
			return protoErrf("text message; v5 carries binary messages only")
		}
		n, err := io.ReadFull(r, buf[:1])
		if n == 0 {
			if err == io.EOF {
				continue // an empty message carries nothing
			}
			return err
		}
		s.wc.activity.Add(1)
		switch ch := buf[0]; ch {
		case ChanStdin:
			if !s.stdinOpen {
				return protoErrf("data on stdin, which is not open")
			}
			if err := s.copyIn(r, s.stdin, buf, ch); err != nil {
				return err
			}
		case ChanResize:
			if s.size == nil {
				return protoErrf("resize without a tty")
			}
			if err := s.resize(r, buf); err != nil {
				return err
			}
		case chanClose:
			if err := s.closeChannel(r, buf); err != nil {
				return err
			}
		default:
			return protoErrf("unknown client channel %d", ch)
		}
	}
}

func (s *rcSession) copyIn(r io.Reader, dst io.Writer, buf []byte, ch byte) error {
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				// The runtime stopped taking input (the process exited); the
				// status will follow. Keep reading the client.
				s.logger.V(4).Info("Runtime refused input", "channel", ch, "err", werr)
			}
			s.bytes[ch].Add(uint64(n))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// TerminalSize is the v5 resize message (capitalised field names, as
// client-go marshals them).
type TerminalSize struct {
	Width  uint16
	Height uint16
}

func (s *rcSession) resize(r io.Reader, buf []byte) error {
	n, err := io.ReadFull(r, buf)
	if err != io.ErrUnexpectedEOF && err != io.EOF {
		if err == nil {
			return protoErrf("resize message larger than %d bytes", len(buf))
		}
		return err
	}
	s.bytes[ChanResize].Add(uint64(n))
	dec := json.NewDecoder(bytes.NewReader(buf[:n]))
	for {
		var size TerminalSize
		if err := dec.Decode(&size); err == io.EOF {
			return nil
		} else if err != nil {
			return protoErrf("invalid resize message %q: %v", truncate(buf[:n], 64), err)
		}
		out, _ := json.Marshal(size)
		if _, err := s.size.Write(out); err != nil {
			s.logger.V(4).Info("Runtime refused resize", "err", err)
		}
	}
}

func (s *rcSession) closeChannel(r io.Reader, buf []byte) error {
	n, _ := io.ReadFull(r, buf[:2])
	if n != 1 {
		return protoErrf("close signal must be exactly [255, channel]")
	}
	switch buf[0] {
	case ChanStdin:
		if !s.stdinOpen {
			return nil // closing twice, or a stdin-less session: harmless
		}
		s.stdinOpen = false
		// A SPDY FIN: the runtime's process sees EOF on stdin.
		if err := s.stdin.Close(); err != nil {
			s.logger.V(4).Info("Half-closing runtime stdin", "err", err)
		}
	case ChanResize:
		if s.size != nil {
			_ = s.size.Close()
		}
	default:
		return protoErrf("close signal for channel %d, which a client cannot close", buf[0])
	}
	return nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
