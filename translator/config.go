package translator

import (
	"time"

	"github.com/kubestream/kubestream/internal/wire"
)

// Config holds the session limits. The zero value is not useful; start from
// DefaultConfig.
type Config struct {
	// Limits are the client connection's: IdleTimeout (the kubelet's
	// --streaming-connection-idle-timeout, 4h), PingPeriod and PongTimeout
	// (for remotecommand the runtime is pinged at PingPeriod too),
	// WriteTimeout (upstream writes the status with a 10s deadline),
	// CloseGrace and MaxMessageSize (a larger client message ends the
	// session with close code 1009).
	wire.Limits
	// StreamCreationTimeout bounds dialing the runtime and creating the SPDY
	// streams (the kubelet's 30s).
	StreamCreationTimeout time.Duration
	// BufferSize is the size of each copy buffer; with the message size
	// limit it bounds a session's memory.
	BufferSize int
}

// DefaultConfig mirrors the kubelet's streaming defaults.
func DefaultConfig() Config {
	return Config{
		Limits: wire.Limits{
			IdleTimeout:    4 * time.Hour,
			PingPeriod:     30 * time.Second,
			PongTimeout:    60 * time.Second,
			WriteTimeout:   10 * time.Second,
			CloseGrace:     5 * time.Second,
			MaxMessageSize: 1 << 20,
		},
		StreamCreationTimeout: 30 * time.Second,
		BufferSize:            32 * 1024,
	}
}
