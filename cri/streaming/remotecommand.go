package streaming

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/kubestream/kubestream/internal/wire"
)

// processIO is what a v5 session hands the runtime's Exec or Attach.
type processIO struct {
	stdin          io.Reader
	stdout, stderr io.WriteCloser
	resize         <-chan TerminalSize
}

// errProcessDone ends the client's stdin once the runtime's call returned:
// what the client still sends has no reader.
var errProcessDone = errors.New("process ended")

// serveV5 runs one v5.channel.k8s.io session. Two goroutines:
//
//   - the handler's (this one) owns the client's read side: stdin into the
//     process's stdin pipe, the close signal (EOF on that pipe), resize
//     messages into the resize channel, and the client's pings and close;
//   - the runtime's (go run) owns the runtime call; the runtime's own
//     goroutines write stdout and stderr through wire.Conn, which
//     serialises them. When the call returns, every byte it wrote is on the
//     wire (writes are synchronous), so the status goes last, with the
//     close frame, and the handler waits (bounded) for the client's close.
//
// Memory: stdin goes through an io.Pipe (no buffer: the client's reads
// wait for the process's), output through pooled buffers of BufferSize.
func (s *server) serveV5(w http.ResponseWriter, r *http.Request, kind string, opts *remotecommandserver.Options, run func(context.Context, processIO) error) {
	logger := klogFor(r, kind)
	ws, err := s.rcUpgrader.Upgrade(wire.Hijacker{ResponseWriter: w}, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	defer s.config.Metrics.session(kind)()
	wc := wire.NewConn(ws, &s.config.Limits)
	defer wc.Shutdown()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()

	var p processIO
	var stdin *io.PipeWriter
	var stdinR *io.PipeReader
	if opts.Stdin {
		stdinR, stdin = io.Pipe()
		p.stdin = stdinR
	}
	if opts.Stdout {
		p.stdout = &outWriter{wc: wc, ch: remotecommand.StreamStdOut, size: s.config.BufferSize, m: s.config.Metrics}
	}
	if opts.Stderr && !opts.TTY {
		p.stderr = &outWriter{wc: wc, ch: remotecommand.StreamStdErr, size: s.config.BufferSize, m: s.config.Metrics}
	}
	var resize chan TerminalSize
	if opts.TTY {
		resize = make(chan TerminalSize, 1)
		p.resize = resize
	}

	done := make(chan *metav1.Status, 1)
	go func() {
		var st *metav1.Status
		// Counted until the status is written (see Stop).
		s.calls.run(func() {
			err := run(ctx, p)
			if stdinR != nil {
				stdinR.CloseWithError(errProcessDone)
			}
			st = wire.ExitStatus(err)
			if s.ctx.Err() != nil {
				st = shutdownStatus() // the call ended because the server stops
			}
			wc.CloseWith(wire.StatusFrame(st), websocket.CloseNormalClosure, "")
		})
		done <- st
	}()
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

	rerr := readV5(wc, stdin, resize, s.config.BufferSize)
	if resize != nil {
		close(resize) // only readV5 sends on it
	}
	if !wc.Closed() {
		// The client ended first: it closed, vanished or broke the
		// protocol. Its answer is settled here, before the process can
		// learn anything of it: a process that saw its stdin end would
		// exit, and the runtime's status (Success, say) would win the
		// race to CloseWith.
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
		// Nobody is left to read a status: the connection goes now.
		wc.Shutdown()
	}
	// The process goes with its session, as with cri-streaming: killed
	// through the context first, its stdin closed only once the runtime's
	// call returned. Closed first, a runtime would hand the process a clean
	// EOF for input that was cut off, and it would take it as complete. The
	// wait is bounded: a runtime may hold its call open until its stdin
	// copy ends.
	cancel()
	var st *metav1.Status
	if stdin != nil {
		select {
		case st = <-done:
		case <-time.After(s.config.Limits.CloseGrace):
		}
		stdin.CloseWithError(cmp.Or(rerr, io.ErrUnexpectedEOF))
	}
	if st == nil {
		st = <-done
	}
	logger.V(3).Info("Session ended", "status", st.Status, "reason", st.Reason)
}

func shutdownStatus() *metav1.Status {
	return wire.InternalError("container runtime streaming server shutting down")
}

// readV5 carries the client's messages (wire.V5Reader decides what each
// asks) to the process until the client's close, an error, or the grace
// after the session's status. stdin and resize are nil when the session
// has none.
func readV5(wc *wire.Conn, stdin *io.PipeWriter, resize chan TerminalSize, size int) error {
	in := wire.NewV5Reader(wc, stdin != nil, resize != nil)
	for {
		m, err := in.Next()
		if err != nil {
			return err
		}
		switch {
		case m.Stdin != nil:
			if err = copyStdin(stdin, m.Stdin, size); errors.Is(err, errProcessDone) {
				// The process is gone; what is left has no reader.
				_, err = io.Copy(io.Discard, m.Stdin)
			}
			if err != nil {
				return err
			}
		case m.CloseStdin:
			stdin.Close() // the process reads EOF
		case m.CloseResize:
		default:
			for _, sz := range m.Sizes {
				// Keep the latest size, never block the reader on a
				// runtime that reads resizes slowly (or not at all).
				select {
				case resize <- TerminalSize{Width: sz.Width, Height: sz.Height}:
				default:
					select {
					case <-resize:
					default:
					}
					resize <- TerminalSize{Width: sz.Width, Height: sz.Height}
				}
			}
		}
	}
}

// copyStdin hands one stdin message to the process through a pooled buffer,
// a whole message (or BufferSize of a larger one) per write
// (wire.ReadStdin): the runtime writes what it is handed to the process's
// FIFO as it comes. io.Copy would allocate a buffer per message, and a
// quiet session holds none.
func copyStdin(stdin *io.PipeWriter, r io.Reader, size int) error {
	bp := wire.GetBuf(size)
	defer wire.PutBuf(bp)
	for {
		n, end, err := wire.ReadStdin(r, *bp)
		if err != nil {
			return err // cut off: none of it is data
		}
		if n > 0 {
			if _, err := stdin.Write((*bp)[:n]); err != nil {
				return err
			}
		}
		if end {
			return nil
		}
	}
}

// outWriter is the process's stdout or stderr: each Write becomes v5
// messages of at most size bytes (wire.Conn.WriteChannel), holding no
// buffer between writes. It is an io.ReaderFrom, so a runtime that copies
// a process's output with io.Copy from a FIFO (containerd does) has it
// moved to the client in the kernel (wire.Conn.ReadFromChannel).
type outWriter struct {
	wc   *wire.Conn
	ch   byte
	size int
	m    *Metrics
}

var (
	_ io.WriteCloser = (*outWriter)(nil)
	_ io.ReaderFrom  = (*outWriter)(nil)
)

// ReadFrom sends src's bytes until its EOF.
func (o *outWriter) ReadFrom(src io.Reader) (int64, error) {
	n, kernel, err := o.wc.ReadFromChannel(o.ch, src, o.size)
	o.m.output(n, kernel)
	return n, err
}

func (o *outWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		k := min(len(p), o.size)
		if err := o.wc.WriteChannel(o.ch, p[:k]); err != nil {
			o.m.output(int64(written), false)
			return written, err
		}
		p, written = p[k:], written+k
	}
	o.m.output(int64(written), false)
	return written, nil
}

// Close is a no-op: v5 ends output with the status, after the runtime's
// call returned.
func (o *outWriter) Close() error { return nil }
