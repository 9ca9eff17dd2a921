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
	// NetNS is the sandbox's network namespace path ("": the node's own).
	NetNS(ctx context.Context, sandboxID string) (string, error)
	// SandboxReady says whether the sandbox still exists and is ready.
	SandboxReady(ctx context.Context, sandboxID string) (bool, error)
}

var _ Sandboxes = (*Client)(nil)

// NetNS asks the runtime for the sandbox's verbose status and reads its
// network namespace from it (NetNSFromStatus).
func (c *Client) NetNS(ctx context.Context, sandboxID string) (string, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID, Verbose: true})
	if err != nil {
		return "", fmt.Errorf("CRI PodSandboxStatus of sandbox %s: %w", sandboxID, wrap(err))
	}
	return NetNSFromStatus(resp)
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

// NetNSFromStatus finds a sandbox's network namespace: "" for a
// host-network sandbox; else the spec's network namespace path, else
// /proc/PID/ns/net of the sandbox's process.
func NetNSFromStatus(resp *runtimeapi.PodSandboxStatusResponse) (string, error) {
	st := resp.GetStatus()
	if st.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE {
		return "", nil
	}
	raw, ok := resp.GetInfo()["info"]
	if !ok {
		return "", &Error{Kind: Internal, Msg: fmt.Sprintf("sandbox %s: the runtime's verbose status has no info, so its network namespace is unknown", st.GetId())}
	}
	var info sandboxInfo
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return "", &Error{Kind: Internal, Msg: fmt.Sprintf("sandbox %s: reading the runtime's verbose info", st.GetId()), Err: err}
	}
	for _, ns := range info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			return ns.Path, nil
		}
	}
	if info.Pid > 0 {
		return "/proc/" + strconv.Itoa(info.Pid) + "/ns/net", nil
	}
	return "", &Error{Kind: Internal, Msg: fmt.Sprintf("sandbox %s: no network namespace path and no process in the runtime's verbose info", st.GetId())}
}
