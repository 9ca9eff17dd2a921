// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// PodRef names a pod as the kubelet API path does; UID is optional.
type PodRef struct {
	Namespace, Name, UID string
}

func (p PodRef) String() string { return p.Namespace + "/" + p.Name }

// PodLookup resolves kubelet API names to runtime IDs. A kubelet plugs in
// its pod manager here; standalone, RuntimeLookup asks the runtime.
type PodLookup interface {
	// SandboxID returns the ready sandbox of pod.
	SandboxID(ctx context.Context, pod PodRef) (string, error)
	// ContainerID returns the running container named container in pod.
	ContainerID(ctx context.Context, pod PodRef, container string) (string, error)
}

// RuntimeLookup finds pods through CRI list calls filtered by the labels the
// kubelet puts on every sandbox and container.
type RuntimeLookup struct{ C *Client }

var (
	_ PodLookup     = RuntimeLookup{}
	_ HandlerSource = RuntimeLookup{}
)

func podLabels(pod PodRef) map[string]string {
	l := map[string]string{
		kubetypes.KubernetesPodNamespaceLabel: pod.Namespace,
		kubetypes.KubernetesPodNameLabel:      pod.Name,
	}
	if pod.UID != "" {
		l[kubetypes.KubernetesPodUIDLabel] = pod.UID
	}
	return l
}

func (l RuntimeLookup) SandboxID(ctx context.Context, pod PodRef) (string, error) {
	sb, err := l.sandbox(ctx, pod)
	if err != nil {
		return "", err
	}
	return sb.Id, nil
}

// RuntimeHandler is the runtime handler of the pod's sandbox ("" for the
// runtime's default).
func (l RuntimeLookup) RuntimeHandler(ctx context.Context, pod PodRef) (string, error) {
	sb, err := l.sandbox(ctx, pod)
	if err != nil {
		return "", err
	}
	return sb.RuntimeHandler, nil
}

// sandbox returns the ready sandbox of pod.
func (l RuntimeLookup) sandbox(ctx context.Context, pod PodRef) (*runtimeapi.PodSandbox, error) {
	ctx, cancel := l.C.ctx(ctx)
	defer cancel()
	resp, err := l.C.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: podLabels(pod),
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	}})
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes of pod %s: %w", pod, wrap(err))
	}
	if len(resp.Items) == 0 {
		return nil, notFoundPod(pod)
	}
	// A restarted pod has several sandboxes; the newest ready one serves.
	best := resp.Items[0]
	for _, s := range resp.Items[1:] {
		if s.CreatedAt > best.CreatedAt {
			best = s
		}
	}
	return best, nil
}

func (l RuntimeLookup) ContainerID(ctx context.Context, pod PodRef, container string) (string, error) {
	sandbox, err := l.SandboxID(ctx, pod)
	if err != nil {
		return "", err
	}
	ctx, cancel := l.C.ctx(ctx)
	defer cancel()
	resp, err := l.C.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		PodSandboxId:  sandbox,
		LabelSelector: map[string]string{kubetypes.KubernetesContainerNameLabel: container},
	}})
	if err != nil {
		return "", fmt.Errorf("listing containers of pod %s: %w", pod, wrap(err))
	}
	var found *runtimeapi.Container
	for _, c := range resp.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING && (found == nil || c.CreatedAt > found.CreatedAt) {
			found = c
		}
	}
	if found == nil {
		if len(resp.Containers) > 0 {
			return "", &Error{Kind: BadRequest, Msg: fmt.Sprintf("container %s in pod %s is not running", container, pod)}
		}
		return "", &Error{Kind: NotFound, Msg: fmt.Sprintf("container %s not found in pod %s", container, pod)}
	}
	return found.Id, nil
}

func notFoundPod(pod PodRef) error {
	if pod.UID != "" {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("pod %s with UID %s not found", pod, pod.UID)}
	}
	return &Error{Kind: NotFound, Msg: fmt.Sprintf("pod %s not found", pod)}
}
