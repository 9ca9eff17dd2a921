package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
)

// TestManifests checks what can be checked without a Docker engine: the
// kind config parses and turns on the gates the apiserver needs, and the
// systemd unit only uses flags kubestream serve has, with values it takes.
func TestManifests(t *testing.T) {
	t.Run("kind", func(t *testing.T) {
		// hack/kind.sh renders the file the way kind will read it.
		b, err := exec.Command("../hack/kind.sh", "render").Output()
		if err != nil {
			t.Fatalf("hack/kind.sh render: %v", err)
		}
		var cfg struct {
			Kind         string          `json:"kind"`
			APIVersion   string          `json:"apiVersion"`
			FeatureGates map[string]bool `json:"featureGates"`
			Nodes        []struct {
				Role                 string            `json:"role"`
				Labels               map[string]string `json:"labels"`
				KubeadmConfigPatches []string          `json:"kubeadmConfigPatches"`
				ExtraMounts          []struct {
					HostPath      string `json:"hostPath"`
					ContainerPath string `json:"containerPath"`
					ReadOnly      bool   `json:"readOnly"`
				} `json:"extraMounts"`
			} `json:"nodes"`
		}
		if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Kind != "Cluster" || cfg.APIVersion != "kind.x-k8s.io/v1alpha4" || len(cfg.Nodes) < 2 {
			t.Fatalf("not a kind cluster with a worker: %+v", cfg)
		}
		var worker, patched bool
		for _, n := range cfg.Nodes {
			if n.Role != "worker" {
				continue
			}
			for _, p := range n.KubeadmConfigPatches {
				worker = worker || strings.Contains(p, "feature-gates: ExtendWebSocketsToKubelet=true")
			}
			for _, m := range n.ExtraMounts {
				patched = patched || (m.ContainerPath == "/usr/bin/kubelet" && filepath.IsAbs(m.HostPath) &&
					filepath.Base(m.HostPath) == "kubelet-kubestream")
			}
		}
		if !worker {
			t.Error("no worker kubelet with ExtendWebSocketsToKubelet on")
		}
		if !patched {
			t.Error("the worker does not run the kubelet with kubestream (extraMounts over /usr/bin/kubelet)")
		}
		for _, g := range []string{"TranslateStreamCloseWebsocketRequests", "PortForwardWebsockets", "ExtendWebSocketsToKubelet"} {
			if !cfg.FeatureGates[g] {
				t.Errorf("feature gate %s not on", g)
			}
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
