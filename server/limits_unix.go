// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package server

import "syscall"

// DescriptorLimit is the process's soft RLIMIT_NOFILE (1024 if unknown),
// at most 2^20.
func DescriptorLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024
	}
	return int(min(rl.Cur, maxDescriptors))
}
