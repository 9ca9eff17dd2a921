package translator

import (
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
	pumpDone := make(chan struct{})
	go func() {
		defer close(pumpDone)
		var werr error
		res.BytesDown, werr = tunnelDown(wc, rt, make([]byte, wire.Headroom+spdy.HeaderLen+cfg.BufferSize))
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
		wc.CloseWith(nil, websocket.CloseGoingAway, "node streaming server shutting down")
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
	res.BytesUp, readErr = tunnelUp(wc, rt, make([]byte, spdy.HeaderLen+cfg.BufferSize))
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
// goroutine, which owns the client's read side.
func tunnelUp(wc *wire.Conn, rt net.Conn, buf []byte) (up uint64, _ error) {
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
			frames.Feed(buf[fill : fill+n])
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
// side ends (nil) or the client's does (the error). spdystream writes a
// frame's header words and payload with separate writes, so a read often
// ends inside a frame; reading on to the frame's end (its rest is on its
// way) makes one message of what would have been several. msg[:Headroom]
// takes each message's frame header (wire.Conn.WriteInPlace).
func tunnelDown(wc *wire.Conn, rt net.Conn, msg []byte) (uint64, error) {
	buf := msg[wire.Headroom:]
	var total uint64
	var frames spdy.Boundary
	for {
		fill := 0
		var err error
		for fill < len(buf) {
			var n int
			n, err = rt.Read(buf[fill:])
			frames.Feed(buf[fill : fill+n])
			fill += n
			if err != nil || frames.AtBoundary() {
				break
			}
		}
		if fill > 0 {
			if werr := wc.WriteInPlace(msg[:wire.Headroom+fill]); werr != nil {
				return total, werr
			}
			total += uint64(fill)
		}
		if err != nil {
			return total, nil
		}
	}
}
