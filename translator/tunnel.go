package translator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/gorilla/websocket"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
)

// TunnelResult describes a finished port-forward tunnel.
type TunnelResult struct {
	BytesUp, BytesDown uint64 // client→runtime, runtime→client
	Err                error
}

// ServeTunnel carries a port-forward SPDY session between a client's
// WebSocket (subprotocol SPDY/3.1+portforward.k8s.io, each binary message a
// run of SPDY bytes) and rt, a connection the runtime already upgraded to
// SPDY portforward.k8s.io. The SPDY session runs end to end between client
// and runtime, so the bytes are copied, not decoded; only frame lengths are
// followed, to cut the copies at frame ends.
func ServeTunnel(ctx context.Context, ws *websocket.Conn, rt net.Conn, cfg Config) TunnelResult {
	logger := klog.FromContext(ctx)
	wc := wire.NewConn(ws, &cfg.Limits)
	defer wc.Shutdown()
	defer rt.Close()

	var res TunnelResult
	pf := newPFResets(logger, cfg.Resets)
	pumpDone := make(chan struct{})
	go func() {
		defer close(pumpDone)
		var werr error
		res.BytesDown, werr = tunnelDown(wc, rt, make([]byte, wire.Headroom+spdy.HeaderLen+cfg.BufferSize), pf)
		if werr != nil {
			if !errors.Is(werr, wire.ErrSessionClosed) {
				logger.V(3).Info("Writing tunnel data to client failed", "err", werr)
				wc.CloseWith(nil, websocket.CloseGoingAway, "")
			}
			rt.Close()
			return
		}
		// The runtime ended the SPDY session.
		wc.CloseWith(nil, websocket.CloseNormalClosure, "")
	}()
	stop := context.AfterFunc(ctx, func() {
		wc.CloseWith(nil, websocket.CloseGoingAway, stopMessage(ctx))
		rt.Close()
	})
	defer stop()
	// The SPDY session inside belongs to client and runtime; their pings
	// cross the tunnel, so only the client leg needs ours.
	wc.StartKeepalive(nil, func() {
		logger.V(2).Info("Closing idle port-forward tunnel", "idleTimeout", cfg.IdleTimeout)
		wc.CloseWith(nil, websocket.CloseNormalClosure, "idle timeout")
		rt.Close()
	})

	// Room for a whole data frame as spdystream writes them (32 KiB). Both
	// buffers are held for the session rather than borrowed per frame
	// (wire.GetBuf): each holds a frame's start across reads that block
	// until the frame's rest arrives.
	var readErr error
	res.BytesUp, readErr = tunnelUp(wc, rt, make([]byte, spdy.HeaderLen+cfg.BufferSize), pf)
	if !wc.Closed() {
		code := websocket.CloseNormalClosure
		if !wire.PeerClosed(readErr) {
			res.Err = readErr
			code = websocket.CloseProtocolError
			if errors.Is(readErr, websocket.ErrReadLimit) {
				code = websocket.CloseMessageTooBig
			}
		}
		wc.CloseWith(nil, code, "")
		if code != websocket.CloseNormalClosure {
			wc.Drain()
		}
	}
	rt.Close()
	<-pumpDone
	return res
}

// tunnelUp copies the client's messages to the runtime until the client's
// side ends (its close, a broken connection, a message that is not binary),
// returning the bytes carried and why it ended. It runs on the handler's
// goroutine, which owns the client's read side. The client's header
// frames are read on the way, to tell pf the streams it opens.
func tunnelUp(wc *wire.Conn, rt net.Conn, buf []byte, pf *pfResets) (up uint64, _ error) {
	// client-go writes each SPDY frame as several messages (header
	// words, then payload); passing each on would cost a syscall and a
	// TCP segment apiece. Bytes are held until they end a frame (or
	// fill the buffer): the rest of a started frame is always on its
	// way, so holding it never stalls the session.
	var frames spdy.Boundary
	fill := 0
	flush := func() error {
		if fill == 0 {
			return nil
		}
		if _, err := rt.Write(buf[:fill]); err != nil {
			return fmt.Errorf("writing tunnel data to runtime: %w", err)
		}
		up += uint64(fill)
		fill = 0
		return nil
	}
	for {
		mt, r, err := wc.NextReader()
		if err != nil {
			return up, err
		}
		if mt != websocket.BinaryMessage {
			return up, fmt.Errorf("tunnel carries binary messages only, got type %d", mt)
		}
		for {
			n, err := r.Read(buf[fill:])
			frames.FeedHeaders(buf[fill:fill+n], maxHeaderFrame, pf.clientFrame)
			fill += n
			if fill == len(buf) {
				if err := flush(); err != nil {
					return up, err
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return up, err
			}
		}
		if frames.AtBoundary() {
			if err := flush(); err != nil {
				return up, err
			}
		}
	}
}

// tunnelDown copies the runtime's bytes to the client until the runtime's
// side ends (nil) or the client's does (the error), frame by frame, so
// that pf sees each of the runtime's data frames whole. Frames already
// read from the runtime go out together in one message (spdystream writes
// a frame's header and payload apart, and each message costs a system
// call and a TCP segment on the client leg); none waits for more to come.
// msg[:Headroom] takes each message's frame header (wire.Conn.WriteInPlace).
func tunnelDown(wc *wire.Conn, rt net.Conn, msg []byte, pf *pfResets) (uint64, error) {
	m := &tunnelMsg{wc: wc, msg: msg}
	fr := spdy.NewReader(bufio.NewReaderSize(rt, wire.ReadBufSize))
	for {
		if _, ok := fr.Buffered(); m.fill > 0 && !ok {
			if err := m.flush(); err != nil {
				return m.total, err
			}
		}
		h, err := fr.Next()
		if err != nil {
			return m.total, m.flush() // the runtime ended the SPDY session
		}
		before, handled, err := pf.runtimeFrame(fr, h)
		if err != nil {
			return m.total, m.flush()
		}
		if err := m.put(before); err != nil {
			return m.total, err
		}
		if handled {
			continue
		}
		if err := m.put(h[:]); err != nil {
			return m.total, err
		}
		rerr, werr := m.copyPayload(fr)
		if werr != nil {
			return m.total, werr
		}
		if rerr != nil {
			return m.total, m.flush()
		}
	}
}

// tunnelMsg is the message tunnelDown fills: the runtime's frames and the
// node's own (pf's), until a flush sends it.
type tunnelMsg struct {
	wc    *wire.Conn
	msg   []byte // msg[:wire.Headroom] takes the message's frame header
	fill  int    // bytes in msg[wire.Headroom:]
	total uint64 // bytes sent
}

func (m *tunnelMsg) flush() error {
	if m.fill == 0 {
		return nil
	}
	if err := m.wc.WriteInPlace(m.msg[:wire.Headroom+m.fill]); err != nil {
		return err
	}
	m.total += uint64(m.fill)
	m.fill = 0
	return nil
}

// room is the message's free room, after a flush when it has none.
func (m *tunnelMsg) room() ([]byte, error) {
	if wire.Headroom+m.fill == len(m.msg) {
		if err := m.flush(); err != nil {
			return nil, err
		}
	}
	return m.msg[wire.Headroom+m.fill:], nil
}

// put adds out to the message.
func (m *tunnelMsg) put(out []byte) error {
	for len(out) > 0 {
		room, err := m.room()
		if err != nil {
			return err
		}
		k := copy(room, out)
		m.fill += k
		out = out[k:]
	}
	return nil
}

// copyPayload adds the rest of fr's frame to the message: rerr is why the
// runtime's side ended inside it, werr why the client's did.
func (m *tunnelMsg) copyPayload(fr *spdy.Reader) (rerr, werr error) {
	for fr.Remaining() > 0 {
		room, err := m.room()
		if err != nil {
			return nil, err
		}
		k, err := fr.Read(room)
		m.fill += k
		if err != nil {
			return err, nil
		}
	}
	return nil, nil
}
