// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package redirect sends the TCP connections that arrive at the kubelet's
// port to kubestream's while kubestream runs, and takes that back when it
// stops, so that a node kubestream leaves is exactly as it was.
//
// The redirect is an nftables table of its own per kubestream process
// (inet family, a nat chain at prerouting: tcp dport FROM, to a local
// address, redirected to port TO), written through netlink with
// github.com/google/nftables, so the image needs no nft or iptables binary
// and the node's own rules (kube-proxy's, the CNI's) are never touched.
// Connections the node opens itself (to 127.0.0.1:10250, or from a
// host-network process to the node's address) pass through output, not
// prerouting, and reach the kubelet directly: kubestream's own requests to
// the kubelet among them.
//
// A process that dies without removing its table (SIGKILL, OOM) would
// leave the kubelet's port pointing at a port no one serves. So each
// table has a lock file in a run directory on the host, held (flock) for
// as long as its process lives; Install deletes every kubestream table
// whose lock is free before adding its own. Two processes (a rolling
// update's old and new pods) can hold tables at once: they redirect to the
// same port, which both serve (SO_REUSEPORT), and each removes only its
// own.
//
// Reading order: redirect_linux.go (Install, Remove, the stale sweep),
// redirect_other.go. Who imports it: kubestream node (cmd/kubestream/app).
package redirect
