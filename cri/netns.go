// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandboxes is what kubestream's own port-forward modes ask of the
// runtime beyond a pod's sandbox ID; *Client is one.
type Sandboxes interface {
	// Sandbox is what the modes need to know of a ready sandbox.
	Sandbox(ctx context.Context, sandboxID string) (Sandbox, error)
	// SandboxReady says whether the sandbox still exists and is ready.
	SandboxReady(ctx context.Context, sandboxID string) (bool, error)
}

// Sandbox is a pod's sandbox as the runtime describes it.
type Sandbox struct {
	// NetNS is its network namespace's path ("": the node's own).
	NetNS string
	// HostNetwork: the pod shares the node's network namespace.
	HostNetwork bool
	// PID is the sandbox process whose /proc/PID/ns/net NetNS is, when
	// the runtime gave no path (0 otherwise): a caller that opens it
	// checks the sandbox still has that process after.
	PID int
	// Annotations are the pod's, as the kubelet gave them to the runtime.
	Annotations map[string]string
}

var _ Sandboxes = (*Client)(nil)

// Sandbox asks the runtime for the sandbox's verbose status and reads its
// network namespace from it (NetNSFromStatus).
func (c *Client) Sandbox(ctx context.Context, sandboxID string) (Sandbox, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID, Verbose: true})
	if err != nil {
		return Sandbox{}, fmt.Errorf("CRI PodSandboxStatus of sandbox %s: %w", sandboxID, wrap(err))
	}
	if resp.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return Sandbox{}, &Error{Kind: NotFound, Msg: fmt.Sprintf("sandbox %s is not ready", sandboxID)}
	}
	return SandboxFromStatus(resp)
}

// SandboxReady: false when the runtime no longer knows the sandbox or it is
// not ready (the pod was deleted or is being torn down).
func (c *Client) SandboxReady(ctx context.Context, sandboxID string) (bool, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID})
	if err != nil {
		err = wrap(err)
		if e := (*Error)(nil); errors.As(err, &e) && e.Kind == NotFound {
			return false, nil
		}
		return false, fmt.Errorf("CRI PodSandboxStatus of sandbox %s: %w", sandboxID, err)
	}
	return resp.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_READY, nil
}

// sandboxInfo is the part of the verbose "info" both containerd and CRI-O
// write: the sandbox's OCI runtime spec and its process (containerd always;
// CRI-O unless the infra container is dropped).
type sandboxInfo struct {
	Pid         int `json:"pid"`
	RuntimeSpec struct {
		Linux struct {
			Namespaces []struct {
				Type string `json:"type"`
				Path string `json:"path"`
			} `json:"namespaces"`
		} `json:"linux"`
	} `json:"runtimeSpec"`
}

// SandboxFromStatus reads a sandbox's verbose status: its annotations
// and its network namespace: "" for a host-network sandbox; else the
// spec's network namespace path, else /proc/PID/ns/net of the sandbox's
// process.
func SandboxFromStatus(resp *runtimeapi.PodSandboxStatusResponse) (Sandbox, error) {
	st := resp.GetStatus()
	sb := Sandbox{Annotations: st.GetAnnotations()}
	if st.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE {
		sb.HostNetwork = true
		return sb, nil
	}
	var err error
	sb.NetNS, sb.PID, err = netNSFromInfo(resp)
	return sb, err
}

func netNSFromInfo(resp *runtimeapi.PodSandboxStatusResponse) (string, int, error) {
	st := resp.GetStatus()
	raw, ok := resp.GetInfo()["info"]
	if !ok {
		return "", 0, &Error{Kind: Internal, Msg: fmt.Sprintf("sandbox %s: the runtime's verbose status has no info, so its network namespace is unknown", st.GetId())}
	}
	var info sandboxInfo
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return "", 0, &Error{Kind: Internal, Msg: fmt.Sprintf("sandbox %s: reading the runtime's verbose info", st.GetId()), Err: err}
	}
	for _, ns := range info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			return ns.Path, 0, nil
		}
	}
	if info.Pid > 0 {
		return "/proc/" + strconv.Itoa(info.Pid) + "/ns/net", info.Pid, nil
	}
	return "", 0, &Error{Kind: Internal, Msg: fmt.Sprintf("sandbox %s: no network namespace path and no process in the runtime's verbose info", st.GetId())}
}
