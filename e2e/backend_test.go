// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/refruntime"
	"github.com/kubestream/kubestream/refruntime/crifixture"
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
	if name := os.Getenv("KUBESTREAM_RUNTIME_NAME"); name != "" { // hack/crio.sh's
		rt.name = name
	}
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
	for _, p := range containerdPods() {
		p.Image, p.LogDir = testImage(), rt.logDir+"/"+p.Name
		id, err := crifixture.RunPod(ctx, c.Runtime(), p)
		if id != "" {
			rt.sandboxes = append(rt.sandboxes, id)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// testImage is the busybox image hack/containerd.sh imports.
func testImage() string {
	if image := os.Getenv("KUBESTREAM_E2E_IMAGE"); image != "" {
		return image
	}
	return "docker.io/kubestream/busybox:e2e"
}

// containerdPods mirrors testPods for a real runtime (host network), plus
// netns: a pod with a network namespace of its own.
func containerdPods() []crifixture.Pod {
	var out []crifixture.Pod
	for _, p := range testPods {
		containers := p.Containers
		if p.Name == "burst" {
			// containerd ends an attach when the attached process exits,
			// without waiting for the output still on its way (seen on
			// 2.4: 4.07-4.15 of 4 MiB arrived, over v5 and SPDY alike, with
			// no error): a pause before the exit keeps TestSlowReaderAttach
			// about the node, not about that.
			containers = burstContainers(len(containers))
			for i := range containers {
				containers[i].Command = []string{"sh", "-c", "read n; head -c $n /dev/zero; sleep 3; exit 7"}
			}
		}
		out = append(out, crifixture.Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID, HostNetwork: true, Containers: containers})
	}
	return append(out, crifixture.Pod{Namespace: "default", Name: "netns", UID: "uid-netns", Containers: []refruntime.ContainerSpec{
		{Name: "server", Command: []string{"nc", "-ll", "-p", strconv.Itoa(netnsEchoPort), "-e", "/bin/cat"}},
	}})
}

const netnsEchoPort = 8080

func teardownBackend() {
	if rt.criClient == nil {
		return
	}
	ctx := context.Background()
	for _, id := range rt.sandboxes {
		crifixture.RemovePod(ctx, rt.criClient.Runtime(), id)
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
		// The socket answers before CRI does ("server is not initialized
		// yet"): the next test must find the runtime as a node would.
		waitFor(t, time.Minute, func() bool {
			c, err := cri.Dial(context.Background(), rt.endpoint, 2*time.Second)
			if err != nil {
				return false
			}
			c.Close()
			return true
		})
	})
}

// runtimeStreamingRequests reads the runtime streaming server's request
// counts by protocol from containerd's metrics endpoint.
func runtimeStreamingRequests(t *testing.T) map[string]float64 {
	return runtimeStreamingRequestsAt(t, os.Getenv("KUBESTREAM_CONTAINERD_METRICS"))
}

// runtimeStreamingRequestsAt reads them from the metrics endpoint at url.
func runtimeStreamingRequestsAt(t *testing.T, url string) map[string]float64 {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("containerd's metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "kubestream_runtime_streaming_requests_total{") {
			continue
		}
		i := strings.Index(line, `protocol="`)
		if i < 0 {
			continue
		}
		p := line[i+len(`protocol="`):]
		p = p[:strings.IndexByte(p, '"')]
		var f float64
		_, _ = fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &f)
		out[p] += f
	}
	return out
}
