// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"context"
	"errors"
	"fmt"
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

	res.Err = s.clientEnded(s.readLoop())
	<-outputsDone
	for i := range res.Bytes {
		res.Bytes[i] = s.bytes[i].Load()
	}
	res.NodeEnded = nodeEnded.Load()
	return res
}

// clientEnded ends the session once the client's side has (readErr,
// readLoop's), and returns what the session's error is then.
func (s *rcSession) clientEnded(readErr error) error {
	var pe *ProtocolError
	switch {
	case errors.As(readErr, &pe):
		s.abort(wire.BadRequest(pe.Error()))
		s.wc.Drain()
		return readErr
	case errors.Is(readErr, wire.ErrProtocol):
		// The reader already sent close 1002; the runtime leg must end
		// too, or a broken frame would hold it (and its process) open.
		s.abort(nil)
		s.wc.Drain()
		return fmt.Errorf("client broke websocket framing: %w", readErr)
	case errors.Is(readErr, websocket.ErrReadLimit):
		// The reader already sent close 1009 to the client.
		s.abort(nil)
		s.wc.Drain()
		return fmt.Errorf("client message larger than %d bytes: %w", s.cfg.MaxMessageSize, readErr)
	case !s.wc.Closed():
		// The client left (close frame, reset or silence) while the
		// command still ran: stop the runtime side.
		s.abort(nil)
		return fmt.Errorf("client went away: %w", readErr)
	}
	return nil
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
	s.rt = newSPDYConn(conn, s.cfg.WriteTimeout)
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
