// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build containerd

package e2e

import (
	"testing"
	"time"
)

// TestPortForwardPrivateNetns forwards into a pod with a network namespace
// of its own (the reference runtime has none, hence the containerd build
// tag): the runtime dials the port inside the pod.
func TestPortForwardPrivateNetns(t *testing.T) {
	if rt.endpoint == "" {
		t.Fatal("built with the containerd tag but KUBESTREAM_CONTAINERD_ENDPOINT is not set (run hack/containerd-e2e.sh)")
	}
	n := startNode(t)
	size := envInt("KUBESTREAM_PF_MB", 32) << 20
	for _, protocol := range []string{"websocket", "spdy"} {
		t.Run(protocol, func(t *testing.T) {
			local, stop := openForward(t, n, protocol, "netns", netnsEchoPort)
			defer stop()
			// busybox nc -ll serves one connection at a time.
			roundTrip(t, local[0], []byte("inside the pod's own network namespace"))
			if err := bulkEcho(local[0], size); err != nil {
				t.Fatal(err)
			}
		})
	}
	n.waitIdle(15 * time.Second)
}
