// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package wire

import (
	"io"
	"net"
)

// newSource is what a Conn reads from: conn itself.
func newSource(conn net.Conn) io.Reader { return conn }
