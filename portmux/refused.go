// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"errors"
	"syscall"
)

// isRefused: a connected UDP socket reports an earlier datagram's ICMP
// port unreachable on its next call; UDP is unreliable, so it is no end.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
