package streaming

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/kubestream/kubestream/internal/wire"
)

// serveTunnel serves port-forward over the tunnel protocol: SPDY/3.1
// portforward.k8s.io carried in WebSocket binary messages. The SPDY server
// is spdystream's (through k8s.io/streaming, which cri-streaming already
// brings), run over the WebSocket as a byte stream (tunnelConn); the stream
// pairing is this package's, with cri-streaming's rules and messages.
//
// Goroutines: spdystream's reader owns the client's read side (through
// tunnelConn.Read); the handler's goroutine (this one) pairs data and error
// streams; each forwarded connection runs the runtime's PortForward on a
// goroutine of its own, which ends when the runtime's copy ends, and which
// this function waits for.
func (s *server) serveTunnel(w http.ResponseWriter, r *http.Request, sandbox string) {
	logger := klogFor(r, "portforward")
	ws, err := s.pfUpgrader.Upgrade(wire.Hijacker{ResponseWriter: w}, r, nil)
	if err != nil {
		return
	}
	defer s.track()()
	wc := wire.NewConn(ws, &s.config.Limits)
	defer wc.Shutdown()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()

	streams := make(chan httpstream.Stream, 4)
	conn, err := spdy.NewServerConnection(&tunnelConn{wc: wc, conn: ws.NetConn()}, func(st httpstream.Stream, _ <-chan struct{}) error {
		if err := checkStream(st.Headers()); err != nil {
			return err
		}
		select {
		case streams <- st:
			return nil
		case <-ctx.Done():
			return errors.New("port-forward session ended")
		}
	})
	if err != nil {
		wc.CloseWith(nil, websocket.CloseInternalServerErr, "")
		return
	}
	wc.StartKeepalive(nil, func() {
		logger.V(2).Info("Closing idle port-forward tunnel", "idleTimeout", s.config.StreamIdleTimeout)
		wc.CloseWith(nil, websocket.CloseNormalClosure, "idle timeout")
		cancel()
	})
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	pf := &pairs{pending: map[string]*streamPair{}, timeout: s.config.StreamCreationTimeout}
	var forwards sync.WaitGroup
	for done := false; !done; {
		select {
		case st := <-streams:
			p := pf.add(st, conn)
			if p == nil {
				continue
			}
			forwards.Go(func() { s.forward(ctx, logger, sandbox, p, conn) })
		case <-conn.CloseChan():
			done = true
		case <-ctx.Done():
			done = true
		}
	}
	cancel()
	_ = conn.Close() // resets every stream: the runtime's copies end
	pf.stopAll()
	forwards.Wait()
	wc.CloseWith(nil, websocket.CloseNormalClosure, "")
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

// forward runs one forwarded connection: the runtime copies between the
// data stream and the pod's port; its error goes to the error stream, as
// cri-streaming words it.
func (s *server) forward(ctx context.Context, logger klog.Logger, sandbox string, p *streamPair, conn httpstream.Connection) {
	defer conn.RemoveStreams(p.data, p.errs)
	defer p.errs.Close()
	defer p.data.Close()
	port, _ := strconv.ParseInt(p.data.Headers().Get(portforward.PortHeader), 10, 32)
	err := s.runtime.PortForward(ctx, sandbox, int32(port), p.data)
	if err != nil {
		msg := fmt.Sprintf("error forwarding port %d to pod %s, uid : %v", port, sandbox, err)
		logger.V(2).Info("Port-forward failed", "port", port, "err", err)
		_, _ = io.WriteString(p.errs, msg)
		_ = p.data.Reset()
		_ = p.errs.Reset()
	}
}

// pairs matches data and error streams by request ID. Only the handler's
// goroutine touches it, except the timers, which take mu.
type pairs struct {
	mu      sync.Mutex
	pending map[string]*streamPair
	timeout time.Duration
}

type streamPair struct {
	data, errs httpstream.Stream
	timer      *time.Timer
}

// add files a stream; it returns the pair once both of its streams came.
// A pair whose other half does not come within the creation timeout is
// reset, as cri-streaming does.
func (pf *pairs) add(st httpstream.Stream, conn httpstream.Connection) *streamPair {
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
			for _, s := range []httpstream.Stream{p.data, p.errs} {
				if s != nil {
					_ = s.Reset()
					conn.RemoveStreams(s)
				}
			}
		})
	}
	dup := false
	if st.Headers().Get(portforward.StreamType) == portforward.StreamTypeData {
		dup, p.data = p.data != nil, st
	} else {
		dup, p.errs = p.errs != nil, st
	}
	if dup {
		_ = st.Reset() // a second stream of one type for a request
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
func requestID(st httpstream.Stream) string {
	if id := st.Headers().Get(portforward.PortForwardRequestIDHeader); id != "" {
		return id
	}
	n := int(st.Identifier())
	if st.Headers().Get(portforward.StreamType) == portforward.StreamTypeData {
		n -= 2
	}
	return strconv.Itoa(n)
}

// tunnelConn is the WebSocket as spdystream's byte stream: reads run through
// the client's binary messages one after another, each write is one
// message. spdystream's reader goroutine is its only reader.
type tunnelConn struct {
	wc   *wire.Conn
	conn net.Conn // for addresses and deadlines
	msg  io.Reader
}

func (t *tunnelConn) Read(p []byte) (int, error) {
	for {
		if t.msg == nil {
			mt, r, err := t.wc.NextReader()
			if err != nil {
				return 0, err
			}
			if mt != websocket.BinaryMessage {
				return 0, fmt.Errorf("tunnel carries binary messages only, got type %d", mt)
			}
			t.msg = r
		}
		n, err := t.msg.Read(p)
		if err == io.EOF {
			t.msg = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (t *tunnelConn) Write(p []byte) (int, error) {
	if err := t.wc.WriteFrame(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close sends the close frame; the handler closes the connection after the
// bounded wait for the client's reply.
func (t *tunnelConn) Close() error {
	t.wc.CloseWith(nil, websocket.CloseNormalClosure, "")
	return nil
}

func (t *tunnelConn) LocalAddr() net.Addr              { return t.conn.LocalAddr() }
func (t *tunnelConn) RemoteAddr() net.Addr             { return t.conn.RemoteAddr() }
func (t *tunnelConn) SetDeadline(time.Time) error      { return nil }
func (t *tunnelConn) SetReadDeadline(time.Time) error  { return nil }
func (t *tunnelConn) SetWriteDeadline(time.Time) error { return nil }
