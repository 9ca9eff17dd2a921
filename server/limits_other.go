// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package server

// DescriptorLimit is maxDescriptors: Windows has no per-process descriptor
// limit of the kind RLIMIT_NOFILE sets (a process's handles are bounded far
// above it), so sessions are bounded as on a Unix node without one.
func DescriptorLimit() int { return maxDescriptors }
