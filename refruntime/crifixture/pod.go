// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package crifixture starts pods on a real CRI runtime the way a kubelet
// would, with the kubelet's labels, for the demo and the e2e suite; a node
// never uses it.
package crifixture

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"

	"github.com/kubestream/kubestream/refruntime"
)

// Pod is a pod to start on a real runtime the way a kubelet would, with
// the kubelet's labels, so kubestream (or any kubelet-API client) finds it.
// The demo and the e2e suite use it; a node never does.
type Pod struct {
	Namespace, Name, UID string
	// HostNetwork shares the node's network namespace; no hostname is set
	// then, since runc refuses one without a private UTS namespace.
	HostNetwork bool
	Containers  []refruntime.ContainerSpec
	Image       string
	LogDir      string
}

// RunPod creates the sandbox and starts every container; it returns the
// sandbox ID even on a partial failure so the caller can remove it.
func RunPod(ctx context.Context, rs runtimeapi.RuntimeServiceClient, p Pod) (string, error) {
	labels := map[string]string{
		kubetypes.KubernetesPodNamespaceLabel: p.Namespace,
		kubetypes.KubernetesPodNameLabel:      p.Name,
		kubetypes.KubernetesPodUIDLabel:       p.UID,
	}
	netMode := runtimeapi.NamespaceMode_POD
	if p.HostNetwork {
		netMode = runtimeapi.NamespaceMode_NODE
	}
	// The containers' namespaces are the sandbox's, as the kubelet sends
	// them (CRI-O refuses a container whose options differ from its pod's).
	ns := &runtimeapi.NamespaceOption{Network: netMode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: p.UID},
		Labels:       labels,
		LogDirectory: p.LogDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: ns,
		}},
	}
	if !p.HostNetwork {
		sbCfg.Hostname = p.Name
	}
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		return "", fmt.Errorf("running sandbox of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	for _, c := range p.Containers {
		cl := map[string]string{kubetypes.KubernetesContainerNameLabel: c.Name}
		for k, v := range labels {
			cl[k] = v
		}
		cc, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
			PodSandboxId:  sb.PodSandboxId,
			SandboxConfig: sbCfg,
			Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: c.Name},
				// The kubelet names the image as the user wrote it too;
				// CRI-O verifies its signature policy against that name.
				Image:   &runtimeapi.ImageSpec{Image: p.Image, UserSpecifiedImage: p.Image},
				Command: c.Command,
				Stdin:   c.Stdin,
				Tty:     c.TTY,
				Labels:  cl,
				LogPath: c.Name + ".log",
				Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
					NamespaceOptions: ns,
				}},
			},
		})
		if err != nil {
			return sb.PodSandboxId, fmt.Errorf("creating container %s: %w", c.Name, err)
		}
		if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cc.ContainerId}); err != nil {
			return sb.PodSandboxId, fmt.Errorf("starting container %s: %w", c.Name, err)
		}
	}
	return sb.PodSandboxId, nil
}

// RemovePod stops and removes a sandbox and its containers.
func RemovePod(ctx context.Context, rs runtimeapi.RuntimeServiceClient, sandboxID string) {
	_, _ = rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandboxID})
	_, _ = rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandboxID})
}
