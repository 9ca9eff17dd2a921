// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"k8s.io/apimachinery/pkg/util/remotecommand"

	"github.com/kubestream/kubestream/internal/wire"
)

// Observer sees a remotecommand session's data as the client does, for a
// recording: output once it was written to the client, input as it went to
// the runtime, each terminal size applied. Output runs on the output pump,
// Input and Resize on the client reader; neither may block (a slow
// observer would slow the session) nor keep p after returning.
type Observer interface {
	Output(channel byte, p []byte)
	Input(p []byte)
	Resize(width, height uint16)
}

// binaryChannels reports whether protocol frames its messages as a channel
// byte and raw bytes (v5 and v4.channel.k8s.io; channel.k8s.io too), which
// a follower of a spliced session can read; the base64 protocols and the
// tunnel it cannot.
func binaryChannels(protocol string) bool {
	switch protocol {
	case remotecommand.StreamProtocolV5Name, remotecommand.StreamProtocolV4Name, "channel.k8s.io":
		return true
	}
	return false
}

// clientFollower reads, for an Observer, the client's frames of a spliced
// session as they pass (masked, in any read sizes): stdin (channel 0) and
// the resize stream (channel 4). It unmasks copies, never the bytes passed
// on, and counts the data it carries (messageFollower). The up copier owns
// it.
type clientFollower struct {
	messageFollower
	obs     Observer // nil: only data is counted
	key     [wire.MaskLen]byte
	pos     int // the mask position within the frame's payload
	resizes resizeFollower
	scratch [512]byte
}

func (c *clientFollower) follow(b []byte) {
	c.each(b, func(h wire.Header) { c.key, c.pos = h.Key, 0 }, func(p []byte) {
		if c.obs != nil {
			c.payload(p)
		}
	})
}

func (c *clientFollower) payload(b []byte) {
	if c.control {
		return
	}
	for len(b) > 0 {
		k := min(len(b), len(c.scratch))
		p := c.scratch[:k]
		copy(p, b[:k])
		c.pos = wire.Unmask(c.key, c.pos, p)
		b = b[k:]
		if c.atPayload {
			c.atPayload, c.channel = false, p[0]
			p = p[1:]
		}
		switch {
		case len(p) == 0:
		case c.channel == ChanStdin:
			c.obs.Input(p)
		case c.channel == ChanResize:
			c.resizes.feed(c.obs, p)
		}
	}
}

// resizeFollower reads a resize stream's JSON (client-go writes one
// continuous stream of sizes) for an observer: each size as it completes.
// A stream it cannot read shows no more sizes.
type resizeFollower struct {
	rs  wire.ResizeStream
	bad bool
}

func (f *resizeFollower) feed(obs Observer, p []byte) {
	if f.bad {
		return
	}
	sizes, err := f.rs.Feed(p)
	if err != nil {
		f.bad = true
	}
	for _, s := range sizes {
		obs.Resize(s.Width, s.Height)
	}
}
