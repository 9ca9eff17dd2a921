// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package redirect

import "errors"

// Rule is a redirect to install (see redirect_linux.go).
type Rule struct {
	From, To uint16
	Owner    string
	RunDir   string
	NetNS    int
}

// Installed is an installed redirect.
type Installed struct{}

// Install is Linux's alone (nftables).
func Install(Rule) (*Installed, error) {
	return nil, errors.New("redirecting the kubelet's port needs Linux (nftables)")
}

// Remove does nothing off Linux.
func (*Installed) Remove() error { return nil }
