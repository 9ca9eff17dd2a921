// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package netns

import "errors"

// do runs f in the process's own namespace, the only one there is off
// Linux (the embedded reference runtime's pods share it).
func (ns Namespace) do(f func() error) error {
	if ns.Path == "" {
		return f()
	}
	return errors.New("network namespaces are Linux's")
}

// unprivilegedPortStart is 1024 off Linux, where ports below it are a
// superuser's.
func unprivilegedPortStart() (int, error) { return 1024, nil }
