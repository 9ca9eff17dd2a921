// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/connreset"
)

// forward runs one forwarded connection: the runtime copies between the
// data stream and the pod's port; its error goes to the error stream, in
// cri-streaming's words. Both streams are half-closed when it returns.
func (s *backend) forward(ctx context.Context, sandbox string, logger klog.Logger, p *streamPair) {
	defer p.errs.Close()
	defer p.data.Close()
	port, _ := strconv.ParseInt(p.data.headers.Get(portforward.PortHeader), 10, 32)
	var err error
	s.calls.run(func() { err = s.runtime.PortForward(ctx, sandbox, int32(port), p.data) })
	switch reason := connreset.Of(err); {
	case err == nil:
	case p.data.resetByClient():
		// The client gave the connection up (its local peer went away) and
		// waits on the error stream only to learn that the forward ended:
		// client-go ends the whole session on any message there, so the
		// runtime's complaint about the reset stream is not sent. spdystream
		// servers never see one: a reset stream's writes succeed there.
		logger.V(4).Info("Port-forward ended by the client's reset", "port", port, "err", err)
	case reason != "":
		// The pod reset or broke this connection mid-stream: it alone
		// ends. Its data stream is reset, so the client's local peer sees
		// the end at once, and its error stream closes empty, since
		// client-go ends the whole session on any word there.
		logger.V(2).Info("Port-forward connection broken by the pod", "port", port, "reason", reason, "err", err)
		s.config.Metrics.connectionReset(reason)
		if rerr := p.data.Reset(); rerr != nil {
			logger.V(3).Info("Resetting a port-forward stream failed", "port", port, "err", rerr)
		}
	default:
		logger.V(2).Info("Port-forward failed", "port", port, "err", err)
		if _, werr := io.WriteString(p.errs, fmt.Sprintf("error forwarding port %d to pod %s, uid : %v", port, sandbox, err)); werr != nil {
			logger.V(3).Info("Reporting a port-forward failure to the client failed", "port", port, "err", werr)
		}
	}
}

// pairs matches data and error streams by request ID. Only the reader
// touches it, except the timers, which take mu.
type pairs struct {
	mu      sync.Mutex
	pending map[string]*streamPair
	timeout time.Duration
	drop    func(*pfStream) // resets and forgets a stream that is not forwarded
}

type streamPair struct {
	data, errs *pfStream
	timer      *time.Timer
}

// add files a stream; it returns the pair once both of its streams came.
// A pair whose other half does not come within the creation timeout is
// reset, as cri-streaming does.
func (pf *pairs) add(st *pfStream) *streamPair {
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
			for _, s := range []*pfStream{p.data, p.errs} {
				if s != nil {
					pf.drop(s)
				}
			}
		})
	}
	dup := false
	if st.headers.Get(portforward.StreamType) == portforward.StreamTypeData {
		dup, p.data = p.data != nil, st
	} else {
		dup, p.errs = p.errs != nil, st
	}
	if dup {
		pf.drop(st) // a second stream of one type for a request
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
func requestID(st *pfStream) string {
	if id := st.headers.Get(portforward.PortForwardRequestIDHeader); id != "" {
		return id
	}
	n := int(st.id)
	if st.headers.Get(portforward.StreamType) == portforward.StreamTypeData {
		n -= 2
	}
	return strconv.Itoa(n)
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
