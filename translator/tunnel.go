// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"context"
	"errors"
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
		res.BytesDown, werr = tunnelDown(wc, rt, wire.NewBuf(wire.Headroom+spdy.HeaderLen+cfg.BufferSize), pf)
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
	res.BytesUp, readErr = tunnelUp(wc, rt, wire.NewBuf(spdy.HeaderLen+cfg.BufferSize), pf)
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

// tunnelUp copies the client's SPDY frames to the runtime until the
// client's side ends (its close, a broken connection, a message that is
// not binary), returning the bytes carried and why it ended. It runs on
// the handler's goroutine, which owns the client's read side. The
// client's header frames are read whole on the way, to tell pf the
// streams it opens.
//
// client-go writes each SPDY frame as several messages (header words,
// then payload); passing each on would cost a system call and a TCP
// segment apiece, so frames are gathered and written when no further one
// is already read (or the batch is full). The rest of a started frame is
// always on its way, so holding its start never stalls the session.
func tunnelUp(wc *wire.Conn, rt net.Conn, buf []byte, pf *pfResets) (uint64, error) {
	fr := spdy.NewReader(&wire.StagedReader{R: wc.BinaryStream()})
	b := &frameBatch{buf: buf, rt: rt}
	for {
		if err := b.flushUnlessMore(fr); err != nil {
			return b.total, err
		}
		var rerr, werr error
		h, rerr := fr.Next()
		if rerr == nil {
			rerr, werr = b.clientFrame(fr, h, pf)
		}
		if werr != nil {
			return b.total, werr
		}
		if rerr != nil {
			// The runtime gets every frame the client finished; of one
			// it cut, only what a full batch sent on already.
			b.fill = b.whole
			if err := b.flush(); err != nil {
				return b.total, err
			}
			return b.total, rerr
		}
		b.whole = b.fill
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
	b := &frameBatch{buf: msg, head: wire.Headroom, ws: wc}
	fr := spdy.NewReader(&wire.StagedReader{R: rt})
	for {
		if err := b.flushUnlessMore(fr); err != nil {
			return b.total, err
		}
		h, err := fr.Next()
		if err != nil {
			return b.total, b.flush() // the runtime ended the SPDY session
		}
		before, handled, err := pf.runtimeFrame(fr, h)
		if err != nil {
			return b.total, b.flush()
		}
		if err := b.put(before); err != nil {
			return b.total, err
		}
		if handled {
			continue
		}
		if err := b.put(h[:]); err != nil {
			return b.total, err
		}
		rerr, werr := b.copyPayload(fr)
		if werr != nil {
			return b.total, werr
		}
		if rerr != nil {
			return b.total, b.flush()
		}
	}
}
