// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"encoding/json"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"

	"github.com/kubestream/kubestream/internal/wire"
)

// frameFollower follows a server-to-client byte stream (wire.Follower)
// for what the node needs of it: whether a close went by, how many data
// bytes (pings and pongs keep no session busy), and for the binary channel
// protocols the output an Observer sees and the error channel's last
// message.
type frameFollower struct {
	messageFollower
	sawClose bool

	// For the binary channel protocols (v5, v4.channel.k8s.io), the error
	// channel's last message is kept (the audit record's exit code), in a
	// fixed array, so an idle session allocates nothing for it and the
	// follower stays comparable (FuzzFrameFollowers); output goes to obs.
	channels  bool
	obs       Observer
	status    [statusMax]byte
	statusLen int // -1: the last status did not fit
}

// messageFollower follows a WebSocket byte stream's frames (wire.Follower)
// and, for the binary channel protocols, which message each payload byte
// belongs to: a data frame's payload opens with its channel, a
// continuation goes on with the message it continues, and control frames
// (which may come between a message's fragments) are no part of it. Both
// directions of a splice follow with it (frameFollower, clientFollower).
type messageFollower struct {
	wire.Follower
	atPayload bool   // the next payload byte is a data frame's first (its channel)
	channel   byte   // the current message's channel
	control   bool   // the current frame is a control frame (ping, pong, close)
	data      uint64 // data frames' payload bytes so far (pings keep no session busy)
}

// next is wire.Follower's Next, keeping the message's state.
func (m *messageFollower) next(b []byte) (h wire.Header, header bool, payload, rest []byte) {
	h, header, payload, rest = m.Next(b)
	switch {
	case header:
		m.control = h.Op >= websocket.CloseMessage
		if h.Op == websocket.BinaryMessage || h.Op == websocket.TextMessage {
			m.atPayload, m.channel = h.Len > 0, noChannel
		}
	case !m.control:
		m.data += uint64(len(payload))
	}
	return h, header, payload, rest
}

// each follows b, the one loop of both directions' followers: it hands
// each frame header to header and each piece of payload (empty while a
// header is incomplete) to payload, and returns how many of b's bytes run
// to the last frame end within b, -1 when no frame ends there.
func (m *messageFollower) each(b []byte, header func(wire.Header), payload func([]byte)) int {
	last := -1
	for rest := b; len(rest) > 0; {
		h, isHeader, p, r := m.next(rest)
		rest = r
		if isHeader {
			header(h)
		} else {
			payload(p)
		}
		if m.AtBoundary() {
			last = len(b) - len(rest)
		}
	}
	return last
}

// statusMax bounds a kept status; a v5 exit status is ~250 bytes plus the
// command line.
const statusMax = 4096

// noChannel is the channel before a message names one.
const noChannel = 0xff

func (f *frameFollower) keep(b []byte) {
	if !f.channels || f.control || len(b) == 0 {
		return
	}
	if f.atPayload {
		f.atPayload = false
		f.channel = b[0]
		if f.channel == ChanError {
			f.statusLen = 0
		}
		b = b[1:]
	}
	switch f.channel {
	case ChanError:
		if f.statusLen < 0 {
			return
		}
		if f.statusLen+len(b) > statusMax {
			f.statusLen = -1
			return
		}
		f.statusLen += copy(f.status[f.statusLen:], b)
	case ChanStdout, ChanStderr:
		if f.obs != nil && len(b) > 0 {
			f.obs.Output(f.channel, b)
		}
	}
}

// cutBeforeStatus reports whether a v4.channel.k8s.io session's runtime
// side ended, between frames, before any status on the error channel.
// (v4.base64.channel.k8s.io's text frames are not read here.)
func (f *frameFollower) cutBeforeStatus(protocol string) bool {
	return protocol == remotecommand.StreamProtocolV4Name && !f.sawClose && f.statusLen == 0 && f.AtBoundary()
}

func (f *frameFollower) lastStatus() *metav1.Status {
	if f.statusLen <= 0 {
		return nil
	}
	st := &metav1.Status{}
	if json.Unmarshal(f.status[:f.statusLen], st) != nil {
		return nil
	}
	return st
}

// follow follows b (messageFollower.each), returning where its last frame
// ends.
func (f *frameFollower) follow(b []byte) int {
	return f.each(b, func(h wire.Header) {
		f.sawClose = f.sawClose || h.Op == websocket.CloseMessage
	}, f.keep)
}
