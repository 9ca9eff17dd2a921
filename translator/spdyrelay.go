// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
)

// RelaySPDY carries a SPDY/3.1 session (remotecommand v1–v4 or
// portforward.k8s.io) between a client and the runtime that accepted the
// same protocol. Bytes pass unchanged, frame by frame, with two exceptions
// that keep output from being lost:
//
//   - The client's PINGs are answered here and never reach the runtime.
//     A runtime stalled by a slow client stops reading its socket
//     (spdystream answers a PING from its read loop, and that write waits
//     behind the output); when the command ends it closes with those PINGs
//     unread, its kernel answers with a reset, and everything the node had
//     received but not yet passed on is discarded. client-go pings every
//     5 s, so a slow reader lost output silently (kubernetes#124571 on the
//     SPDY path). The PINGs still do their job: the client's path to the
//     node stays alive, and the node's own path to the runtime is its
//     business.
//   - When the runtime's side ends before it closed an error stream (its
//     status for exec and attach, one per forwarded connection), the client
//     is told so on that stream. client-go reads an error stream that just
//     ends as success, so without this a cut session looked complete.
//
// Why a frame-following relay and not SPDY-to-SPDY translation with
// kubestream's own runtime client: following frames costs one 8-byte header
// read per frame on top of a byte copy, keeps exactly one buffer per
// direction, and leaves the client's SPDY session (its flow, its header
// compression) untouched end to end; translating would decode and
// re-encode every stream for no gain.
//
// RelaySPDY returns when both connections are closed and both copiers have
// ended. After the runtime's end the client closes first (or goes silent
// for cfg.PingPeriod + cfg.PongTimeout), so the node never resets data the
// client has yet to read.
func RelaySPDY(ctx context.Context, client, rt net.Conn, protocol string, cfg Config, obs Observer) RelayResult {
	r := &spdyRelay{
		client:     client,
		rt:         rt,
		cw:         clientWriter{conn: client}, // no write deadline, as before: the client's liveness is the up copier's
		cfg:        &cfg,
		obs:        obs,
		outStreams: map[uint32]byte{},
		portFwd:    protocol == portforward.PortForwardV1Name,
		jsonStatus: protocol == remotecommand.StreamProtocolV4Name,
		errStreams: map[uint32]bool{},
	}
	if r.portFwd {
		r.pf = newPFResets(klog.FromContext(ctx), cfg.Resets)
	}
	upDone := make(chan struct{})
	go func() {
		defer close(upDone)
		r.up()
	}()
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.stopping = true
		r.mu.Unlock()
		// Wakes the down copier between frames or mid-frame; it tells
		// the client why the session ended.
		_ = rt.SetReadDeadline(time.Now()) // fails only once closed; its I/O then says why
	})
	defer stop()

	downErr := r.down()
	r.cw.downEnded()
	r.tellLost(ctx, downErr)
	_ = rt.Close() // done with it: a failed close changes nothing
	// The client closes once it has read everything (client-go does, after
	// the status); until then the up copier keeps reading it and
	// answering its pings. No half-close from here: a byte-copying proxy
	// on the way (the apiserver's) takes it as the end and closes the
	// client's connection at once, and the client's next ping then resets
	// what it had yet to read. A client that stops sending anything for a
	// ping period and a pong timeout is gone.
	r.runtimeEnded.Store(true)
	r.extendClientDeadline()
	<-upDone
	_ = client.Close() // done with it: a failed close changes nothing
	r.res.Err = downErr
	r.res.Status = r.finalStatus()
	return r.res
}

// finalStatus reads what the error stream said (v4): a Status, or nothing
// at all when the command succeeded.
func (r *spdyRelay) finalStatus() *metav1.Status {
	if !r.jsonStatus || !r.errClosed {
		return nil
	}
	if len(r.status) == 0 {
		return &metav1.Status{Status: metav1.StatusSuccess}
	}
	st := &metav1.Status{}
	if json.Unmarshal(r.status, st) != nil {
		return nil
	}
	return st
}

// RelayResult is what a relayed SPDY session carried and how it ended.
type RelayResult struct {
	BytesUp, BytesDown uint64
	// PingsAnswered counts the client's PINGs the node answered itself
	// (or queued, to answer at the end of a frame half written).
	PingsAnswered uint64
	// Lost names the error streams the runtime left open: the client was
	// told on each that its session was cut. Zero for a complete session.
	Lost int
	// Err is why the runtime's side ended, nil for a clean close; UpErr
	// why the client's did, nil for a close.
	Err, UpErr error
	// Status is what the runtime sent on the error stream (v4, whose error
	// stream carries a metav1.Status; nil otherwise, or when it did not
	// fit statusMax).
	Status *metav1.Status
}

type spdyRelay struct {
	client, rt net.Conn
	cfg        *Config
	portFwd    bool
	jsonStatus bool // v4: the error stream carries a metav1.Status

	// cw serialises frames towards the client: the down copier's (held
	// only while writing, so a runtime stalled mid-frame delays no PING
	// reply) and the up copier's PING replies, kept whole.
	cw clientWriter

	mu         sync.Mutex
	stopping   bool            // the node is shutting down (ctx ended)
	upEnded    bool            // the client's side ended first
	errStreams map[uint32]bool // error streams the runtime has not closed; nil: not known

	res RelayResult

	// The up copier's: headers decodes the client's header blocks (one
	// zlib stream across the connection) to learn which streams are error
	// streams, until a frame it cannot hold or read (untracked).
	headers   spdy.HeaderDecoder
	untracked bool

	// runtimeEnded: from then on the client has a liveness deadline.
	runtimeEnded atomic.Bool

	// The down copier's: the grace for the frame in flight is armed once
	// the node stops.
	graceArmed bool
	// obs, when set, sees stdout and stderr (down copier) and stdin and
	// resizes (up copier); outStreams (under mu) maps the output streams
	// the runtime has not ended to their v5 channels, stdinID and resizeID
	// are the up copier's.
	obs               Observer
	outStreams        map[uint32]byte
	stdinID, resizeID uint32
	resizes           resizeFollower // the up copier's
	// status collects the error stream's data (v4), for the audit record;
	// errClosed: the runtime finished an error stream (with no data: the
	// command succeeded).
	status    []byte
	errClosed bool
	// pf keeps a pod's reset of one forwarded connection from ending the
	// whole port-forward (nil for remotecommand).
	pf *pfResets
}

// tellLost writes, on every error stream the runtime left open, why the
// session was cut, and half-closes it: client-go reports what it reads
// there as the session's error.
func (r *spdyRelay) tellLost(ctx context.Context, downErr error) {
	r.mu.Lock()
	ids := make([]uint32, 0, len(r.errStreams))
	for id := range r.errStreams {
		ids = append(ids, id)
	}
	outs := make([]uint32, 0, len(r.outStreams))
	for id := range r.outStreams {
		outs = append(outs, id)
	}
	stopping, upEnded := r.stopping, r.upEnded
	r.mu.Unlock()
	if len(ids) == 0 || upEnded {
		return // complete, or the client ended it and hears nothing more
	}
	var msg string
	switch {
	case stopping || ctx.Err() != nil:
		msg = "session cut: " + stopMessage(ctx)
	case downErr == nil:
		msg = "session cut: the container runtime closed the connection before reporting the session's end"
	default:
		msg = fmt.Sprintf("session cut: lost the connection to the container runtime (%v); output may be incomplete", downErr)
	}
	payload := []byte(msg)
	if r.jsonStatus {
		payload, _ = json.Marshal(wire.InternalError(msg)) // a Status always marshals
	}
	_ = r.client.SetWriteDeadline(time.Now().Add(r.cfg.WriteTimeout)) // fails only once closed; its I/O then says why
	r.cw.mu.Lock()
	defer r.cw.mu.Unlock()
	if r.cw.cut {
		return // half a frame went to the client: nothing can follow it
	}
	for _, id := range ids {
		if r.writeFin(id, payload) != nil {
			return
		}
		r.res.Lost++
	}
	// The output streams the runtime left open end too: client-go returns
	// the error stream's words only once stdout and stderr have ended, and
	// would otherwise wait for a connection the node keeps open for it.
	for _, id := range outs {
		if r.writeFin(id, nil) != nil {
			return
		}
	}
}

// writeFin writes payload on stream id as its last data frame (under cw.mu).
func (r *spdyRelay) writeFin(id uint32, payload []byte) error {
	_, err := r.client.Write(appendData(nil, id, payload, true))
	return err
}
