// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func sandboxStatus(mode runtimeapi.NamespaceMode, info string) *runtimeapi.PodSandboxStatusResponse {
	r := &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: "sb", Annotations: map[string]string{"a": "b"},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: mode}}}}}
	if info != "" {
		r.Info = map[string]string{"info": info}
	}
	return r
}

func TestSandboxFromStatus(t *testing.T) {
	cases := []struct {
		name, info, want string
		mode             runtimeapi.NamespaceMode
		fails            bool
		pid              int
	}{
		// containerd 2.x: pid, then the spec with a pinned namespace.
		{name: "containerd", mode: runtimeapi.NamespaceMode_POD, want: "/var/run/netns/cni-1234",
			info: `{"pid":4242,"processStatus":"running","netNamespaceClosed":false,"image":"registry.k8s.io/pause:3.10",` +
				`"runtimeSpec":{"ociVersion":"1.2.0","linux":{"namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},` +
				`{"type":"mount"},{"type":"network","path":"/var/run/netns/cni-1234"}]}}}`},
		// CRI-O (server/sandbox_status.go createSandboxInfo): image, pid, runtimeSpec.
		{name: "cri-o", mode: runtimeapi.NamespaceMode_POD, want: "/var/run/netns/5d2f-netns",
			info: `{"image":"registry.k8s.io/pause:3.10","pid":77,"runtimeSpec":{"linux":{"namespaces":` +
				`[{"type":"ipc","path":"/var/run/ipcns/5d2f"},{"type":"network","path":"/var/run/netns/5d2f-netns"}]}}}`},
		// CRI-O with the infra container dropped: the spec alone.
		{name: "cri-o spoofed", mode: runtimeapi.NamespaceMode_POD, want: "/var/run/netns/ab",
			info: `{"runtimeSpec":{"linux":{"namespaces":[{"type":"network","path":"/var/run/netns/ab"}]}}}`},
		// A namespace the runtime created without pinning it: the process's.
		{name: "pid fallback", mode: runtimeapi.NamespaceMode_POD, want: "/proc/99/ns/net", pid: 99,
			info: `{"pid":99,"runtimeSpec":{"linux":{"namespaces":[{"type":"network"}]}}}`},
		{name: "host network", mode: runtimeapi.NamespaceMode_NODE, want: "", info: `{"pid":1}`},
		{name: "no info", mode: runtimeapi.NamespaceMode_POD, fails: true},
		{name: "nothing usable", mode: runtimeapi.NamespaceMode_POD, info: `{"runtimeSpec":{}}`, fails: true},
		{name: "bad json", mode: runtimeapi.NamespaceMode_POD, info: `{`, fails: true},
	}
	for _, c := range cases {
		sb, err := SandboxFromStatus(sandboxStatus(c.mode, c.info))
		if (err != nil) != c.fails || sb.NetNS != c.want || sb.PID != c.pid {
			t.Errorf("%s: got %+v, %v; want %q pid %d (fails %v)", c.name, sb, err, c.want, c.pid, c.fails)
		}
		if host := c.mode == runtimeapi.NamespaceMode_NODE; err == nil && (sb.HostNetwork != host || sb.Annotations["a"] != "b") {
			t.Errorf("%s: host network %v, annotations %v", c.name, sb.HostNetwork, sb.Annotations)
		}
	}
}
