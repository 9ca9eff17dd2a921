// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import "time"

// Limits are what a Conn enforces; the translator's and the runtime
// server's configurations each hold one.
type Limits struct {
	// IdleTimeout ends a session after this long without data in either
	// direction (0: never).
	IdleTimeout time.Duration
	// PingPeriod is how often the peer is pinged; PongTimeout how long
	// after a ping period without any frame from it the peer is taken as
	// dead.
	PingPeriod  time.Duration
	PongTimeout time.Duration
	// WriteTimeout bounds one write to the peer.
	WriteTimeout time.Duration
	// CloseGrace bounds the wait for the peer's close reply.
	CloseGrace time.Duration
	// MaxMessageSize is the largest message accepted; a larger one ends
	// the session with close code 1009.
	MaxMessageSize int
}

// DefaultLimits are the kubelet's streaming defaults, the one place both
// ends take them from: no idle end before 4 h (its
// --streaming-connection-idle-timeout), a ping every 30 s, a peer silent
// for 90 s gone, 10 s per write (upstream writes the status with a 10 s
// deadline), 5 s for the peer's close reply, 1 MiB messages.
var DefaultLimits = Limits{
	IdleTimeout:    4 * time.Hour,
	PingPeriod:     30 * time.Second,
	PongTimeout:    60 * time.Second,
	WriteTimeout:   10 * time.Second,
	CloseGrace:     5 * time.Second,
	MaxMessageSize: 1 << 20,
}

// DefaultBufferSize is a copy buffer's size: with MaxMessageSize it bounds
// a session's memory.
const DefaultBufferSize = 32 << 10

// WithDefaults is l with each zero field (IdleTimeout aside: 0 is never)
// taken from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	for _, f := range []struct{ v, d *time.Duration }{
		{&l.PingPeriod, &d.PingPeriod}, {&l.PongTimeout, &d.PongTimeout},
		{&l.WriteTimeout, &d.WriteTimeout}, {&l.CloseGrace, &d.CloseGrace},
	} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	if l.MaxMessageSize <= 0 {
		l.MaxMessageSize = d.MaxMessageSize
	}
	return l
}
