// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
	"github.com/kubestream/kubestream/config"
)

// TestManifests checks what can be checked without a Docker engine: the
// kind config parses and gives each node its flavour (make test-kind runs
// the cluster), and the systemd unit only uses flags kubestream serve has,
// with values it takes.
func TestManifests(t *testing.T) {
	t.Run("kind", func(t *testing.T) {
		// hack/kind.sh renders the file the way kind will read it.
		b, err := exec.Command("../hack/kind.sh", "render").Output()
		if err != nil {
			t.Fatalf("hack/kind.sh render: %v", err)
		}
		var cfg struct {
			Kind                 string                           `json:"kind"`
			APIVersion           string                           `json:"apiVersion"`
			Networking           struct{ DisableDefaultCNI bool } `json:"networking"`
			KubeadmConfigPatches []string                         `json:"kubeadmConfigPatches"`
			Nodes                []struct {
				Role        string            `json:"role"`
				Labels      map[string]string `json:"labels"`
				ExtraMounts []struct {
					HostPath      string `json:"hostPath"`
					ContainerPath string `json:"containerPath"`
					ReadOnly      bool   `json:"readOnly"`
				} `json:"extraMounts"`
			} `json:"nodes"`
		}
		if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Kind != "Cluster" || cfg.APIVersion != "kind.x-k8s.io/v1alpha4" || !cfg.Networking.DisableDefaultCNI {
			t.Fatalf("not a kind cluster with the node's own CNI: %+v", cfg)
		}
		patches := strings.Join(cfg.KubeadmConfigPatches, "\n")
		for _, want := range []string{"failCgroupV1: false", "maxPerCore: 0", "tcpEstablishedTimeout: 0s", "tcpCloseWaitTimeout: 0s"} {
			if !strings.Contains(patches, want) {
				t.Errorf("the kubeadm patches lack %q", want)
			}
		}
		// One control plane and a worker of each flavour; each node's
		// flavour file (mounted where the node's entrypoint reads it)
		// exists and names a kubelet and a containerd (and, on crio, the
		// runtime that takes containerd's place).
		var workers []string
		for _, n := range cfg.Nodes {
			if len(n.ExtraMounts) < 1 || n.ExtraMounts[0].ContainerPath != "/kind/flavour" || !n.ExtraMounts[0].ReadOnly {
				t.Fatalf("node %+v: want its flavour mounted read-only at /kind/flavour", n)
			}
			// A flavour whose kubelet reads kubestream's file has it
			// mounted, read-only, where its flag says.
			f, _ := os.ReadFile(n.ExtraMounts[0].HostPath)
			if strings.Contains(string(f), "--kubestream-config=/kind/kubestream.yaml") {
				if len(n.ExtraMounts) != 2 || n.ExtraMounts[1].ContainerPath != "/kind/kubestream.yaml" || !n.ExtraMounts[1].ReadOnly {
					t.Fatalf("node %+v: its kubelet reads /kind/kubestream.yaml, not mounted read-only", n)
				}
				if _, err := config.Load(n.ExtraMounts[1].HostPath); err != nil {
					t.Fatalf("node %+v: %v", n, err)
				}
			} else if len(n.ExtraMounts) != 1 {
				t.Fatalf("node %+v: mounts beyond its flavour", n)
			}
			f, err := os.ReadFile(n.ExtraMounts[0].HostPath)
			if err != nil || !strings.Contains(string(f), "\nkubelet=kubelet-") || !strings.Contains(string(f), "\ncontainerd=containerd-") {
				t.Fatalf("flavour %s: %v\n%s", n.ExtraMounts[0].HostPath, err, f)
			}
			if n.Role == "worker" {
				flavour := filepath.Base(n.ExtraMounts[0].HostPath)
				if n.Labels["kubestream.io/flavour"] != flavour {
					t.Errorf("worker with flavour %s labelled %v", flavour, n.Labels)
				}
				workers = append(workers, flavour)
			}
		}
		if strings.Join(workers, " ") != "ws skew stock crio daemon" || cfg.Nodes[0].Role != "control-plane" {
			t.Errorf("nodes: control plane first, then workers ws, skew, stock, crio, daemon; got %+v", cfg.Nodes)
		}
	})
	// manifests/node: the DaemonSet's arguments are kubestream node's
	// flags with values it takes, its configuration file loads, and the
	// kind overlay's patch of the drain timeout names the argument there.
	t.Run("node", func(t *testing.T) {
		b, err := os.ReadFile("../manifests/node/daemonset.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var ds struct {
			Spec struct {
				Template struct {
					Spec struct {
						HostNetwork bool `json:"hostNetwork"`
						Containers  []struct {
							Args []string `json:"args"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &ds); err != nil {
			t.Fatal(err)
		}
		pod := ds.Spec.Template.Spec
		if !pod.HostNetwork || len(pod.Containers) != 1 || len(pod.Containers[0].Args) < 6 || pod.Containers[0].Args[0] != "node" {
			t.Fatalf("the DaemonSet's pod: %+v", pod)
		}
		o := app.NewNodeOptions()
		fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(pod.Containers[0].Args[1:]); err != nil {
			t.Fatalf("the DaemonSet's flags: %v", err)
		}
		if pod.Containers[0].Args[5] != "--drain-timeout=2m" {
			t.Errorf("hack/kind/node patches args[5] as the drain timeout; it is %q", pod.Containers[0].Args[5])
		}
		if _, err := config.Load("../manifests/node/config.yaml"); err != nil {
			t.Fatal(err)
		}
	})
	// manifests/node/port-forward-modes: its patches apply to the base
	// DaemonSet (each op's path is there) and give exactly what the modes
	// need, and its configuration file turns them on (make test-kind
	// serves them on the daemon worker through it).
	t.Run("node/port-forward-modes", func(t *testing.T) {
		var comp struct {
			Kind    string `json:"kind"`
			Patches []struct {
				Patch string `json:"patch"`
			} `json:"patches"`
		}
		readYAML(t, "../manifests/node/port-forward-modes/kustomization.yaml", &comp)
		if comp.Kind != "Component" || len(comp.Patches) != 1 {
			t.Fatalf("not a Component with one patch: %+v", comp)
		}
		ops, err := yaml.YAMLToJSON([]byte(comp.Patches[0].Patch))
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile("../manifests/node/daemonset.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if b, err = yaml.YAMLToJSON(b); err != nil {
			t.Fatal(err)
		}
		if b, err = patch.Apply(b); err != nil {
			t.Fatalf("the component's patch on manifests/node/daemonset.yaml: %v", err)
		}
		var ds appsv1.DaemonSet
		if err := json.Unmarshal(b, &ds); err != nil {
			t.Fatal(err)
		}
		c := ds.Spec.Template.Spec.Containers[0]
		if caps := c.SecurityContext.Capabilities.Add; !slices.Equal(caps, []corev1.Capability{"NET_ADMIN", "SYS_ADMIN"}) {
			t.Errorf("capabilities %v, want NET_ADMIN (the redirect) and SYS_ADMIN (setns) alone", caps)
		}
		i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/var/run/netns" })
		if i < 0 || !c.VolumeMounts[i].ReadOnly || c.VolumeMounts[i].MountPropagation == nil ||
			*c.VolumeMounts[i].MountPropagation != corev1.MountPropagationHostToContainer {
			t.Fatalf("no read-only /var/run/netns with HostToContainer propagation: %+v", c.VolumeMounts)
		}
		v := ds.Spec.Template.Spec.Volumes
		j := slices.IndexFunc(v, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
		if j < 0 || v[j].HostPath == nil || v[j].HostPath.Path != "/var/run/netns" {
			t.Errorf("the netns mount's volume: %+v", v)
		}
		cfg, err := config.Load("../manifests/node/port-forward-modes/config.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ReversePortForward != "on" || cfg.UDPPortForward != "on" {
			t.Errorf("the component's configuration leaves the modes %q, %q", cfg.ReversePortForward, cfg.UDPPortForward)
		}
	})
	t.Run("systemd", func(t *testing.T) {
		b, err := os.ReadFile("../manifests/systemd/kubestream.service")
		if err != nil {
			t.Fatal(err)
		}
		unit := strings.ReplaceAll(string(b), "\\\n", " ")
		var exec string
		for _, line := range strings.Split(unit, "\n") {
			if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
				exec = v
			}
		}
		args := strings.Fields(exec)
		if len(args) < 2 || args[1] != "serve" {
			t.Fatalf("ExecStart %q does not run kubestream serve", exec)
		}
		o := app.NewServeOptions()
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		o.AddFlags(fs)
		fs.Int("v", 0, "klog verbosity")
		if err := fs.Parse(args[2:]); err != nil {
			t.Fatalf("unit's flags: %v", err)
		}
		if o.ContainerRuntimeEndpoint == "" || o.ClientCAFile == "" || o.Port != 10350 {
			t.Errorf("unit does not configure runtime, client CA and port: %+v", o)
		}
	})
}

// readYAML decodes a YAML file into v.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
