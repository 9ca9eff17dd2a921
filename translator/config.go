package translator

import "time"

// Config holds the session limits. The zero value is not useful; start from
// DefaultConfig.
type Config struct {
	// IdleTimeout ends a session after this long without data in either
	// direction (the kubelet's --streaming-connection-idle-timeout, 4h).
	IdleTimeout time.Duration
	// StreamCreationTimeout bounds dialing the runtime and creating the SPDY
	// streams (the kubelet's 30s).
	StreamCreationTimeout time.Duration
	// PingPeriod is how often the client (and, for remotecommand, the
	// runtime) is pinged; PongTimeout how long after a ping period without
	// any frame the client is taken as dead.
	PingPeriod  time.Duration
	PongTimeout time.Duration
	// WriteTimeout bounds one write to the client (upstream writes the
	// status with a 10s deadline).
	WriteTimeout time.Duration
	// CloseGrace bounds the wait for the peer's close reply.
	CloseGrace time.Duration
	// BufferSize is the size of each copy buffer; with the message size
	// limit it bounds a session's memory.
	BufferSize int
	// MaxMessageSize is the largest WebSocket message accepted from a
	// client; a larger one ends the session with close code 1009.
	MaxMessageSize int
}

// DefaultConfig mirrors the kubelet's streaming defaults.
func DefaultConfig() Config {
	return Config{
		IdleTimeout:           4 * time.Hour,
		StreamCreationTimeout: 30 * time.Second,
		PingPeriod:            30 * time.Second,
		PongTimeout:           60 * time.Second,
		WriteTimeout:          10 * time.Second,
		CloseGrace:            5 * time.Second,
		BufferSize:            32 * 1024,
		MaxMessageSize:        1 << 20,
	}
}
