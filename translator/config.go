// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"time"

	"github.com/kubestream/kubestream/internal/wire"
)

// Config holds the session limits. The zero value is not useful; start from
// DefaultConfig.
type Config struct {
	// Limits are the client connection's (for remotecommand the runtime
	// is pinged at PingPeriod too).
	wire.Limits
	// StreamCreationTimeout bounds dialing the runtime and creating the SPDY
	// streams (the kubelet's 30s).
	StreamCreationTimeout time.Duration
	// BufferSize is the size of each copy buffer; with the message size
	// limit it bounds a session's memory.
	BufferSize int
	// Resets, when set, counts the forwarded connections a pod resets on
	// the tunnel and the SPDY relay.
	Resets ResetCounter
}

// DefaultConfig mirrors the kubelet's streaming defaults (wire.DefaultLimits).
func DefaultConfig() Config {
	return Config{
		Limits:                wire.DefaultLimits,
		StreamCreationTimeout: 30 * time.Second,
		BufferSize:            wire.DefaultBufferSize,
	}
}
