// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	ndffeatures "k8s.io/component-helpers/nodedeclaredfeatures/features"

	kubeletadapter "github.com/kubestream/kubestream/kubelet"
	"github.com/kubestream/kubestream/server"
)

// prepare runs before the kubelet parses its flags. The v1.35 kubelet has
// no ExtendWebSocketsToKubelet, so a v1.37 apiserver would translate every
// WebSocket to SPDY before it reaches kubestream. prepare gives the kubelet
// kubestream's gate, with v1.36's spec (beta, on), so
// --feature-gates=ExtendWebSocketsToKubelet=false turns it off as on later
// kubelets, and adds the feature to the node-declared-features registry
// that kubelet.go builds its framework from: with NodeDeclaredFeatures on
// (alpha in v1.35, off by default) the node then lists the feature in
// status.declaredFeatures and the apiserver passes WebSockets through. With
// it off the node cannot declare anything, and the apiserver translates.
// v1.35 has no counter of WebSocket sessions (WebSocketRequested stays nil).
func prepare() (kubeletadapter.Options, error) {
	err := utilfeature.DefaultMutableFeatureGate.AddVersioned(map[featuregate.Feature]featuregate.VersionedSpecs{
		server.ExtendWebSocketsToKubelet: {{Version: version.MustParse("1.35"), Default: true, PreRelease: featuregate.Beta}},
	})
	if err != nil {
		return kubeletadapter.Options{}, fmt.Errorf("adding the %s feature gate: %w", server.ExtendWebSocketsToKubelet, err)
	}
	ndffeatures.AllFeatures = append(ndffeatures.AllFeatures, declaredWebSockets{})
	return kubeletadapter.Options{}, nil
}

// declaredWebSockets is v1.36's extendwebsocketstokubelet feature in
// v1.35's Feature interface: discovered from the gate, never asked of pods.
type declaredWebSockets struct{}

func (declaredWebSockets) Name() string { return string(server.ExtendWebSocketsToKubelet) }
func (declaredWebSockets) Discover(cfg *ndf.NodeConfiguration) bool {
	return cfg.FeatureGates.Enabled(string(server.ExtendWebSocketsToKubelet))
}
func (declaredWebSockets) InferForScheduling(*ndf.PodInfo) bool  { return false }
func (declaredWebSockets) InferForUpdate(_, _ *ndf.PodInfo) bool { return false }
func (declaredWebSockets) MaxVersion() *version.Version          { return nil }
