// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package app

import (
	"context"
	"net"
)

// reusePortListen is a plain listener off Linux, where kubestream node
// does not run (its redirect is nftables).
func reusePortListen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}
