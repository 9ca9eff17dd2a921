// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package refruntime

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// The RuntimeService methods a kubelet's streaming needs; the rest answer
// Unimplemented through the embedded server.

func (r *Runtime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       "kubestream-reference",
		RuntimeVersion:    "0.1.0",
		RuntimeApiVersion: "v1",
	}, nil
}

func (r *Runtime) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}}, nil
}

func (r *Runtime) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := req.GetFilter()
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, sb := range r.sandboxes {
		if f.GetId() != "" && f.GetId() != sb.id {
			continue
		}
		if f.GetState() != nil && f.GetState().State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if !labelsMatch(f.GetLabelSelector(), sb.labels()) {
			continue
		}
		resp.Items = append(resp.Items, sb.proto())
	}
	return resp, nil
}

func (sb *sandbox) proto() *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{
		Id: sb.id,
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: sb.spec.Name, Namespace: sb.spec.Namespace, Uid: sb.spec.UID,
		},
		State:     runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: sb.created,
		Labels:    sb.labels(),
	}
}

func (r *Runtime) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	sb, ok := r.sandboxes[req.PodSandboxId]
	r.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod sandbox %q not found", req.PodSandboxId)
	}
	p := sb.proto()
	// The reference runtime's pods are processes of this host: they share
	// its network namespace, as host-network pods do.
	host := &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
		Options: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}}
	return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{
		Id: p.Id, Metadata: p.Metadata, State: p.State, CreatedAt: p.CreatedAt, Labels: p.Labels, Linux: host,
	}}, nil
}

func (c *container) state() runtimeapi.ContainerState {
	if c.running() {
		return runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return runtimeapi.ContainerState_CONTAINER_EXITED
}

func (c *container) labels() map[string]string {
	l := c.sandbox.labels()
	l[kubetypes.KubernetesContainerNameLabel] = c.name
	return l
}

func (r *Runtime) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f := req.GetFilter()
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &runtimeapi.ListContainersResponse{}
	for _, c := range r.containers {
		switch {
		case f.GetId() != "" && f.GetId() != c.id,
			f.GetPodSandboxId() != "" && f.GetPodSandboxId() != c.sandbox.id,
			f.GetState() != nil && f.GetState().State != c.state(),
			!labelsMatch(f.GetLabelSelector(), c.labels()):
			continue
		}
		resp.Containers = append(resp.Containers, &runtimeapi.Container{
			Id:           c.id,
			PodSandboxId: c.sandbox.id,
			Metadata:     &runtimeapi.ContainerMetadata{Name: c.name},
			Image:        &runtimeapi.ImageSpec{Image: "host"},
			ImageRef:     "host",
			State:        c.state(),
			CreatedAt:    c.created,
			Labels:       c.labels(),
		})
	}
	return resp, nil
}

func (r *Runtime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := r.container(req.ContainerId)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{
		Id:         c.id,
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.name},
		State:      c.state(),
		CreatedAt:  c.created,
		FinishedAt: c.finished,
		ExitCode:   c.exitCode,
		Labels:     c.labels(),
	}}, nil
}

func (r *Runtime) runningContainer(id string) error {
	c, err := r.container(id)
	if err != nil {
		return status.Error(codes.NotFound, err.Error())
	}
	if !c.running() {
		return status.Errorf(codes.FailedPrecondition, "container %s is not running", c.name)
	}
	return nil
}

func (r *Runtime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if err := r.runningContainer(req.ContainerId); err != nil {
		return nil, err
	}
	return r.streaming.GetExec(req)
}

func (r *Runtime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if err := r.runningContainer(req.ContainerId); err != nil {
		return nil, err
	}
	c, _ := r.container(req.ContainerId)
	if req.Stdin && !c.spec.Stdin {
		return nil, status.Errorf(codes.InvalidArgument, "container %s was not started with stdin open", c.name)
	}
	return r.streaming.GetAttach(req)
}

func (r *Runtime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	r.mu.Lock()
	_, ok := r.sandboxes[req.PodSandboxId]
	r.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod sandbox %q not found", req.PodSandboxId)
	}
	return r.streaming.GetPortForward(req)
}
