// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/wire"
)

// processIO is what a v5 session hands the runtime's Exec or Attach.
type processIO struct {
	stdin          io.Reader
	stdout, stderr io.WriteCloser
	resize         <-chan TerminalSize
}

// v5Process is a v5 session's side of the process: what the runtime's call
// is handed (io), and the ends the session feeds and closes, nil where the
// session has none.
type v5Process struct {
	io     processIO
	stdinW *io.PipeWriter    // the client's stdin goes in (readV5)
	stdinR *io.PipeReader    // the process's side, closed when the call returns
	resize chan TerminalSize // only readV5 sends on it
}

// newV5Process builds the streams opts asks for. stdin goes through an
// io.Pipe (no buffer: the client's reads wait for the process's), output
// through pooled buffers of size (outWriter).
func newV5Process(wc *wire.Conn, opts *remotecommandserver.Options, size int, m *Metrics) *v5Process {
	var p v5Process
	if opts.Stdin {
		p.stdinR, p.stdinW = io.Pipe()
		p.io.stdin = p.stdinR
	}
	if opts.Stdout {
		p.io.stdout = &outWriter{wc: wc, ch: remotecommand.StreamStdOut, size: size, m: m}
	}
	if opts.Stderr && !opts.TTY {
		p.io.stderr = &outWriter{wc: wc, ch: remotecommand.StreamStdErr, size: size, m: m}
	}
	if opts.TTY {
		p.resize = make(chan TerminalSize, 1)
		p.io.resize = p.resize
	}
	return &p
}

// runV5 runs one v5.channel.k8s.io session on an upgraded connection. Two
// goroutines:
//
//   - the handler's (this one) owns the client's read side: stdin into the
//     process's stdin pipe, the close signal (EOF on that pipe), resize
//     messages into the resize channel, and the client's pings and close;
//   - the runtime's (startCall) owns the runtime call; the runtime's own
//     goroutines write stdout and stderr through wire.Conn, which
//     serialises them. When the call returns, every byte it wrote is on the
//     wire (writes are synchronous), so the status goes last, with the
//     close frame, and the handler waits (bounded) for the client's close.
func (s *backend) runV5(ws *websocket.Conn, logger klog.Logger, opts *remotecommandserver.Options, run func(context.Context, processIO) error) {
	wc := wire.NewConn(ws, &s.limits)
	defer wc.Shutdown()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()

	p := newV5Process(wc, opts, s.config.BufferSize, s.config.Metrics)
	done := s.startCall(ctx, wc, p, run)
	wc.StartKeepalive(nil, func() {
		logger.V(2).Info("Closing idle session", "idleTimeout", s.config.StreamIdleTimeout)
		wc.CloseWith(wire.StatusFrame(wire.InternalError(fmt.Sprintf("session idle for %v, closed by the container runtime", s.config.StreamIdleTimeout))), websocket.CloseNormalClosure, "idle timeout")
		cancel()
	})
	stopOnShutdown := context.AfterFunc(ctx, func() {
		// 1000 after a status, as the translator ends a session at shutdown:
		// client-go reports the status, not the close.
		wc.CloseWith(wire.StatusFrame(shutdownStatus()), websocket.CloseNormalClosure, "")
	})
	defer stopOnShutdown()

	rerr := readV5(wc, p.stdinW, p.resize, s.config.BufferSize)
	if p.resize != nil {
		close(p.resize) // only readV5 sends on it
	}
	if !wc.Closed() {
		clientEnded(wc, rerr, logger)
	}
	cancel()
	st := p.end(done, rerr, s.limits.CloseGrace)
	logger.V(3).Info("Session ended", "status", st.Status, "reason", st.Reason)
}

// startCall runs the runtime's call on a goroutine of its own, which ends
// the session with the call's status; the status comes on the channel
// returned.
func (s *backend) startCall(ctx context.Context, wc *wire.Conn, p *v5Process, run func(context.Context, processIO) error) <-chan *metav1.Status {
	done := make(chan *metav1.Status, 1)
	go func() {
		var st *metav1.Status
		// Counted until the status is written (see Stop).
		s.calls.run(func() {
			err := run(ctx, p.io)
			if p.stdinR != nil {
				p.stdinR.CloseWithError(errProcessDone)
			}
			st = wire.ExitStatus(err)
			if s.ctx.Err() != nil {
				st = shutdownStatus() // the call ended because the server stops
			}
			wc.CloseWith(wire.StatusFrame(st), websocket.CloseNormalClosure, "")
		})
		done <- st
	}()
	return done
}

// clientEnded answers a client that ended the session first: it closed,
// vanished or broke the protocol. Its answer is settled here, before the
// process can learn anything of it: a process that saw its stdin end would
// exit, and the runtime's status (Success, say) would win the race to
// CloseWith. Nobody is left to read a status: the connection goes now.
func clientEnded(wc *wire.Conn, rerr error, logger klog.Logger) {
	var pe *wire.ProtocolError
	switch {
	case errors.As(rerr, &pe):
		wc.CloseWith(wire.StatusFrame(wire.BadRequest(pe.Error())), websocket.CloseNormalClosure, "")
		wc.Drain()
	case errors.Is(rerr, wire.ErrProtocol), errors.Is(rerr, websocket.ErrReadLimit):
		// The reader sent the close code; nothing else can be read.
	default:
		logger.V(3).Info("Client ended the session before the process did", "err", rerr)
	}
	wc.Shutdown()
}

// end waits for the runtime's call, its context ended, and returns its
// status. The process goes with its session, as with cri-streaming: killed
// through the context first, its stdin closed only once the runtime's call
// returned. Closed first, a runtime would hand the process a clean EOF for
// input that was cut off, and it would take it as complete. The wait is
// bounded by grace: a runtime may hold its call open until its stdin copy
// ends.
func (p *v5Process) end(done <-chan *metav1.Status, rerr error, grace time.Duration) *metav1.Status {
	var st *metav1.Status
	if p.stdinW != nil {
		select {
		case st = <-done:
		case <-time.After(grace):
		}
		p.stdinW.CloseWithError(cmp.Or(rerr, io.ErrUnexpectedEOF))
	}
	if st == nil {
		st = <-done
	}
	return st
}

func shutdownStatus() *metav1.Status {
	return wire.InternalError("container runtime streaming server shutting down")
}
