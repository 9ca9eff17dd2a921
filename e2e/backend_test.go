package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"

	"github.com/kubestream/kubestream/cri"
)

// The suite runs against one of two runtimes: the embedded reference
// runtime (default), or a containerd brought up by hack/containerd.sh when
// KUBESTREAM_CONTAINERD_ENDPOINT is set. The same tests, pods and
// assertions apply to both.
type backend struct {
	name     string
	endpoint string // "" for the embedded reference runtime

	criClient *cri.Client
	sandboxes []string
	logDir    string
}

var rt = &backend{name: "reference"}

// setupBackend creates, for containerd, the pods the reference runtime
// defines in testPods (same names, same containers, host network), plus a
// pod with a private network namespace running a TCP echo server.
func setupBackend() error {
	ep := os.Getenv("KUBESTREAM_CONTAINERD_ENDPOINT")
	if ep == "" {
		return nil
	}
	rt.name = "containerd " + os.Getenv("KUBESTREAM_CONTAINERD_VERSION")
	rt.endpoint = ep
	ctx := context.Background()
	c, err := cri.Dial(ctx, ep, time.Minute)
	if err != nil {
		return err
	}
	rt.criClient = c
	if rt.logDir, err = os.MkdirTemp("", "kubestream-e2e-logs-"); err != nil {
		return err
	}
	image := os.Getenv("KUBESTREAM_E2E_IMAGE")
	if image == "" {
		image = "docker.io/kubestream/busybox:e2e"
	}
	pods := append([]podDef{}, containerdPods()...)
	for _, p := range pods {
		if err := rt.runPod(ctx, p, image); err != nil {
			return fmt.Errorf("creating pod %s: %w", p.name, err)
		}
	}
	return nil
}

type podDef struct {
	name, uid  string
	hostNet    bool
	containers []containerDef
}

type containerDef struct {
	name       string
	command    []string
	stdin, tty bool
}

// containerdPods mirrors testPods for a real runtime; netns is the pod with
// a network namespace of its own.
func containerdPods() []podDef {
	var out []podDef
	for _, p := range testPods {
		d := podDef{name: p.Name, uid: p.UID, hostNet: true}
		for _, c := range p.Containers {
			d.containers = append(d.containers, containerDef{name: c.Name, command: c.Command, stdin: c.Stdin, tty: c.TTY})
		}
		out = append(out, d)
	}
	return append(out, podDef{name: "netns", uid: "uid-netns", containers: []containerDef{
		{name: "server", command: []string{"nc", "-ll", "-p", strconv.Itoa(netnsEchoPort), "-e", "/bin/cat"}},
	}})
}

const netnsEchoPort = 8080

func (b *backend) runPod(ctx context.Context, p podDef, image string) error {
	rs := b.criClient.Runtime()
	labels := map[string]string{
		kubetypes.KubernetesPodNamespaceLabel: "default",
		kubetypes.KubernetesPodNameLabel:      p.name,
		kubetypes.KubernetesPodUIDLabel:       p.uid,
	}
	netMode := runtimeapi.NamespaceMode_POD
	if p.hostNet {
		// No hostname: runc refuses one without a private UTS namespace.
		netMode = runtimeapi.NamespaceMode_NODE
	}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: p.name, Namespace: "default", Uid: p.uid},
		Labels:       labels,
		LogDirectory: b.logDir + "/" + p.name,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: netMode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
		}},
	}
	if !p.hostNet {
		sbCfg.Hostname = p.name
	}
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		return err
	}
	b.sandboxes = append(b.sandboxes, sb.PodSandboxId)
	for _, c := range p.containers {
		cl := map[string]string{kubetypes.KubernetesContainerNameLabel: c.name}
		for k, v := range labels {
			cl[k] = v
		}
		cc, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
			PodSandboxId:  sb.PodSandboxId,
			SandboxConfig: sbCfg,
			Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: c.name},
				Image:    &runtimeapi.ImageSpec{Image: image},
				Command:  c.command,
				Stdin:    c.stdin,
				Tty:      c.tty,
				Labels:   cl,
				LogPath:  c.name + ".log",
			},
		})
		if err != nil {
			return fmt.Errorf("creating container %s: %w", c.name, err)
		}
		if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cc.ContainerId}); err != nil {
			return fmt.Errorf("starting container %s: %w", c.name, err)
		}
	}
	return nil
}

func teardownBackend() {
	if rt.criClient == nil {
		return
	}
	ctx := context.Background()
	for _, id := range rt.sandboxes {
		_, _ = rt.criClient.Runtime().StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
		_, _ = rt.criClient.Runtime().RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	}
	rt.criClient.Close()
	os.RemoveAll(rt.logDir)
}

// killRuntime crashes the runtime under a running session: the reference
// runtime stops as if it crashed; containerd gets SIGKILL and is brought
// back after the test (its containers live on in their shims).
func (n *node) killRuntime(t *testing.T) {
	t.Helper()
	if rt.endpoint == "" {
		n.run.Runtime.Stop()
		return
	}
	pid, err := strconv.Atoi(os.Getenv("KUBESTREAM_CONTAINERD_PID"))
	if err != nil {
		t.Fatalf("KUBESTREAM_CONTAINERD_PID: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		out, err := exec.Command("sh", "-c", os.Getenv("KUBESTREAM_CONTAINERD_RESTART")).Output()
		if err != nil {
			t.Fatalf("restarting containerd: %v", err)
		}
		os.Setenv("KUBESTREAM_CONTAINERD_PID", strings.TrimSpace(string(out)))
	})
}
