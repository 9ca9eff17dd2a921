// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kind

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/tools/clientcmd"

	pfapp "github.com/kubestream/kubestream/cmd/kubectl-kubestream/app"
	"github.com/kubestream/kubestream/portmux"
)

// kindModesOperator: what the operator's switches do on a live node. The
// worker's kubelet is restarted with a configuration of the test's own
// (UDP off, reverse opt-in, host-network pods allowed), then given its
// own back: UDP is not served (the plugin says so), reverse only to the
// annotated pods, a host-network one among them once allowed.
func kindModesOperator(t *testing.T, cp *controlPlane, plugin string, n kindNode) {
	const file = "/etc/kubestream-operator-test.yaml"
	const config = "apiVersion: kubestream.io/v1alpha1\nkind: StreamingConfiguration\n" +
		"reversePortForward: \"opt-in\"\nudpPortForward: \"off\"\nportForwardAllowHostNetwork: true\n"
	nodeExec(t, n, "sh", "-c", fmt.Sprintf("printf '%%s' '%s' >%s && sed -i 's#--kubestream-config=/kind/kubestream.yaml#--kubestream-config=%s#' /etc/default/kubelet && grep -q %s /etc/default/kubelet && systemctl restart kubelet",
		config, file, file, file))
	t.Cleanup(func() {
		nodeExec(t, n, "sh", "-c", fmt.Sprintf("sed -i 's#--kubestream-config=%s#--kubestream-config=/kind/kubestream.yaml#' /etc/default/kubelet && rm -f %s && systemctl restart kubelet", file, file))
		waitKubelet(t, cp, n)
	})
	waitKubelet(t, cp, n)

	annotation := map[string]string{"portforward.kubestream.io/reverse": "true"}
	plain := kindPod(t, cp, n.flavour)
	annotated := kindModesPod(t, cp, n.flavour, annotation, false)
	hostPod := kindModesPod(t, cp, n.flavour, annotation, true)

	// UDP off: the plugin's words.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := pluginCmd(ctx, cp, plugin, cp.kubeconfig, "port-forward", "--udp", plain, "17001:7000").CombinedOutput()
	want := fmt.Sprintf("node %s does not serve UDP port-forward: its kubelet runs without kubestream, or its operator left the mode off", n.name)
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("UDP with the mode off: %v: %q; want %q", err, out, want)
	}

	for _, c := range []struct {
		name, pod, want string
	}{
		{"opt-in, a pod without the annotation", plain, "portforward.kubestream.io/reverse"},
		{"opt-in, an annotated pod", annotated, ""},
		{"an annotated host-network pod, host network allowed", hostPod, ""},
	} {
		ws, err := kindModeDial(t, cp, c.pod, portmux.ReverseProtocol, 18082)
		if ws != nil {
			ws.Close()
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want served", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want refused saying %q", c.name, err, c.want)
		default:
			t.Logf("%s: served %v (%v)", c.name, err == nil, err)
		}
	}
}

// waitKubelet waits until the node's kubelet serves its API again.
func waitKubelet(t *testing.T, cp *controlPlane, n kindNode) {
	t.Helper()
	time.Sleep(2 * time.Second) // the old one's port closes first
	waitFor(t, 2*time.Minute, func() bool {
		return cp.kubectl(nil, "get", "--raw", "/api/v1/nodes/"+n.name+"/proxy/healthz").code == 0
	})
}

// kindModeDial opens a mode's session to pod through the apiserver.
func kindModeDial(t *testing.T, cp *controlPlane, pod, proto string, ports ...int) (*websocket.Conn, error) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{}
	for _, p := range ports {
		q.Add("ports", fmt.Sprint(p))
	}
	u, _ := url.Parse(strings.TrimRight(cfg.Host, "/") + "/api/v1/namespaces/default/pods/" + pod + "/portforward?" + q.Encode())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, err := pfapp.Dial(ctx, cfg, u, proto)
	var ns *pfapp.NotServedError
	if errors.As(err, &ns) {
		return nil, fmt.Errorf("not served: %w", err)
	}
	return ws, err
}

// kindModesPod runs a pod with annotations (nil: none) on the flavour's
// worker, on the node's network when hostNetwork.
func kindModesPod(t *testing.T, cp *controlPlane, flavour string, annotations map[string]string, hostNetwork bool) string {
	name := fmt.Sprintf("modes-%s-%d", flavour, time.Now().UnixNano()%1_000_000)
	cp.apply(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default", "annotations": annotations},
		"spec": map[string]any{
			"nodeSelector": map[string]string{"kubestream.io/flavour": flavour}, "hostNetwork": hostNetwork,
			"terminationGracePeriodSeconds": 1,
			"containers": []any{map[string]any{"name": "app", "image": "docker.io/kubestream/busybox:e2e",
				"imagePullPolicy": "Never", "command": []string{"sleep", "3600"}}},
		},
	})
	t.Cleanup(func() { cp.kubectl(nil, "delete", "pod", name, "--grace-period=1", "--wait=false") })
	cp.must(nil, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=3m")
	return name
}
