// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wiretest

import (
	"bytes"
	"fmt"
	"net"
	"time"
)

// UDPRoundTrip sends msg on c until it comes back whole, waiting wait for
// each answer, up to 5 tries: UDP may drop. An answer to prev (the
// datagram before msg) that came after its own wait ran out is read past,
// not taken for msg's; any other answer is an error (boundaries or bytes
// changed). buf must hold the largest answer.
func UDPRoundTrip(c net.Conn, msg, prev []byte, wait time.Duration, buf []byte) error {
	for try := 0; try < 5; try++ {
		if _, err := c.Write(msg); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		for {
			k, err := c.Read(buf)
			switch {
			case err != nil: // lost on its way: sent again
			case bytes.Equal(buf[:k], msg):
				return nil
			case prev != nil && bytes.Equal(buf[:k], prev):
				continue // late
			default:
				return fmt.Errorf("sent %d bytes, got %d back (boundaries or bytes changed)", len(msg), k)
			}
			break
		}
	}
	return fmt.Errorf("%d bytes sent 5 times, never answered", len(msg))
}
