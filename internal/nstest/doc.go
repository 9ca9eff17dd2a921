// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nstest makes throwaway network namespaces for tests (Linux, as
// root): the sockets and nftables rules a test makes there never touch the
// host's. Who imports it: internal/netns's and internal/redirect's tests.
package nstest
