// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package wire

import "io"

// spliceFrom: splice(2) is Linux's; output is copied here.
func (c *Conn) spliceFrom(byte, io.Reader, int) (int64, bool, error) { return 0, false, nil }
