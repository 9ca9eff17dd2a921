// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	servermetrics "k8s.io/kubernetes/pkg/kubelet/server/metrics"

	kubeletadapter "github.com/kubestream/kubestream/kubelet"
)

// prepare runs before the kubelet parses its flags. From v1.36 on (this file
// builds v1.36 and v1.37) the kubelet has ExtendWebSocketsToKubelet and
// declares it on its node itself, and counts WebSocket sessions.
func prepare() (kubeletadapter.Options, error) {
	return kubeletadapter.Options{WebSocketRequested: servermetrics.IncWebSocketStreamingRequest}, nil
}
