//go:build !linux

package wire

import (
	"io"
	"net"
)

// newSource is what a Conn reads from: conn itself.
func newSource(conn net.Conn) io.Reader { return conn }
