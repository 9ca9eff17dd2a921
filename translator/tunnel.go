package translator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/gorilla/websocket"
	"k8s.io/klog/v2"
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
// and runtime, so the bytes are copied without parsing a single frame.
func ServeTunnel(ctx context.Context, ws *websocket.Conn, rt net.Conn, cfg Config) TunnelResult {
	logger := klog.FromContext(ctx)
	wc := newWSConn(ws, &cfg)
	defer wc.shutdown()
	defer rt.Close()

	var res TunnelResult
	pumpDone := make(chan struct{})
	go func() {
		defer close(pumpDone)
		buf := make([]byte, cfg.BufferSize)
		for {
			n, err := rt.Read(buf)
			if n > 0 {
				if werr := wc.writeFrame(buf[:n]); werr != nil {
					if !errors.Is(werr, errSessionClosed) {
						logger.V(3).Info("Writing tunnel data to client failed", "err", werr)
						wc.closeWith(nil, websocket.CloseGoingAway, "")
					}
					rt.Close()
					return
				}
				res.BytesDown += uint64(n)
			}
			if err != nil {
				// The runtime ended the SPDY session.
				wc.closeWith(nil, websocket.CloseNormalClosure, "")
				return
			}
		}
	}()
	stop := context.AfterFunc(ctx, func() {
		wc.closeWith(nil, websocket.CloseGoingAway, "node streaming server shutting down")
		rt.Close()
	})
	defer stop()
	// The SPDY session inside belongs to client and runtime; their pings
	// cross the tunnel, so only the client leg needs ours.
	wc.startKeepalive(nil, func() {
		logger.V(2).Info("Closing idle port-forward tunnel", "idleTimeout", cfg.IdleTimeout)
		wc.closeWith(nil, websocket.CloseNormalClosure, "idle timeout")
		rt.Close()
	})

	buf := make([]byte, cfg.BufferSize)
	readErr := func() error {
		defer close(wc.readDone)
		for {
			mt, r, err := ws.NextReader()
			if err != nil {
				return err
			}
			wc.extendReadDeadline()
			if mt != websocket.BinaryMessage {
				return fmt.Errorf("tunnel carries binary messages only, got type %d", mt)
			}
			wc.activity.Add(1)
			for {
				n, err := r.Read(buf)
				if n > 0 {
					if _, werr := rt.Write(buf[:n]); werr != nil {
						return fmt.Errorf("writing tunnel data to runtime: %w", werr)
					}
					res.BytesUp += uint64(n)
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
			}
		}
	}()
	if !wc.finished.Load() {
		code := websocket.CloseNormalClosure
		if !peerClosed(readErr) {
			res.Err = readErr
			code = websocket.CloseProtocolError
			if errors.Is(readErr, websocket.ErrReadLimit) {
				code = websocket.CloseMessageTooBig
			}
		}
		wc.closeWith(nil, code, "")
	}
	rt.Close()
	<-pumpDone
	return res
}
