// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kind

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// kindNode is one node of the kind cluster hack/kind.sh up made.
type kindNode struct {
	name, flavour, ip string
	features          []string // status.declaredFeatures
}

// kindFlavours are the workers' flavours (hack/kind/flavours), one worker
// each.
var kindFlavours = []string{"ws", "skew", "stock", "crio", "daemon"}

// runtime is the systemd unit of the node's container runtime.
func (n kindNode) runtime() string {
	if n.flavour == "crio" {
		return "crio"
	}
	return "containerd"
}

// streamer is the name of the node's process that serves kubestream's
// sessions: the kubelet, or kubestream node's in front of it on daemon.
func (n kindNode) streamer() string {
	if n.flavour == "daemon" {
		return "kubestream"
	}
	return "kubelet"
}

// native: the node's runtime runs kubestream's runtime-side server
// (containerd on ws, CRI-O on crio), so no leg speaks SPDY.
func (n kindNode) native() bool { return n.flavour == "ws" || n.flavour == "crio" }

// TestKind runs kubectl, through the kind cluster's own kubeconfig, against
// pods on its five workers (manifests/kind/cluster.yaml): ws (the kubelet
// v1.37.2 with kubestream on containerd with kubestream's runtime-side
// server), skew (the kubelet v1.35.4 with kubestream on stock containerd),
// stock (upstream's kubelet v1.37.2 on stock containerd), crio (the
// kubelet v1.37.2 with kubestream on CRI-O with kubestream's runtime-side
// server) and daemon (stock's kubelet and containerd with kubestream node
// in front, from manifests/node). The same sessions must work on all five; the nodes' own metrics say who carried
// them and how. Then what a node operator does to a live cluster: a pod
// deleted under an exec, a kubelet replaced on a live node, a node
// container restarted. Run it with `make test-kind` (hack/kind.sh e2e).
func TestKind(t *testing.T) {
	kubeconfig := os.Getenv("KUBESTREAM_KIND_KUBECONFIG")
	if kubeconfig == "" {
		t.Fatal("KUBESTREAM_KIND_KUBECONFIG is not set: run this with `make test-kind` (hack/kind.sh e2e)")
	}
	bin, err := exec.Command("../hack/kube.sh", "bin").Output()
	if err != nil {
		t.Fatal(err)
	}
	cluster := &controlPlane{t: t, bin: strings.TrimSpace(string(bin)), kubeconfig: kubeconfig}
	kc := cluster.forTest

	nodes := kindNodes(t, kc(t))
	t.Run("nodes", func(t *testing.T) {
		for _, n := range nodes {
			t.Logf("node %s (%s): declaredFeatures %v", n.name, n.flavour, n.features)
			// Every kubelet here declares it: upstream's v1.37 by default,
			// v1.35.4 through kubestream's gate (hack/kube/kubelet-v1.35.4).
			if !slices.Contains(n.features, "ExtendWebSocketsToKubelet") {
				t.Errorf("node %s (%s) does not declare ExtendWebSocketsToKubelet: %v", n.name, n.flavour, n.features)
			}
		}
		for _, f := range kindFlavours {
			if nodes[f].name == "" {
				t.Fatalf("no %s worker in %v", f, nodes)
			}
		}
	})

	// The cluster's add-ons built here run: CoreDNS (on the control plane)
	// answers a pod on each worker, across the pod network, through
	// kube-proxy's service address.
	t.Run("dns", func(t *testing.T) {
		cp := kc(t)
		cp.must(nil, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=2m")
		cp.must(nil, "-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout=2m")
		for _, flavour := range kindFlavours {
			pod := kindPod(t, cp, flavour)
			var r kubectlResult
			waitFor(t, time.Minute, func() bool {
				r = cp.kubectl(nil, "exec", pod, "-c", "app", "--", "nslookup", "kubernetes.default.svc.cluster.local")
				return r.code == 0 && strings.Contains(r.stdout, "10.96.0.1")
			})
		}
	})

	for _, flavour := range kindFlavours {
		t.Run(flavour, func(t *testing.T) {
			cp, n := kc(t), nodes[flavour]
			pod := kindPod(t, cp, flavour)
			before := kindMetrics(t, cp, n)
			kindStreaming(t, cp, pod)
			after := kindMetrics(t, cp, n)
			kindRoutes(t, n, before, after)
			if n.native() {
				t.Run("crictl-websocket", func(t *testing.T) { kindCrictlWebSocket(t, n, pod) })
			}
		})
	}

	// A pod deleted under an exec: kubectl says the session ended, nothing
	// of the session stays on the node.
	t.Run("pod-deleted", func(t *testing.T) {
		for _, flavour := range kindFlavours {
			t.Run(flavour, func(t *testing.T) {
				cp, n := kc(t), nodes[flavour]
				pod := kindPod(t, cp, flavour)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cmd := cp.kubectlCmd(ctx, "exec", pod, "-c", "app", "--", "sh", "-c", "echo started; exec sleep 600")
				var out, errb syncBuffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, time.Minute, func() bool { return strings.Contains(out.String(), "started") })
				start := time.Now()
				cp.must(nil, "delete", "pod", pod, "--grace-period=1", "--wait=false")
				err := cmd.Wait()
				took := time.Since(start)
				if err == nil || strings.TrimSpace(errb.String()) == "" || ctx.Err() != nil {
					t.Fatalf("exec into a deleted pod: %v after %s, stderr %q; want a failure that says so", err, took.Round(time.Second), errb.String())
				}
				t.Logf("kubectl after the pod's deletion (%s): %v: %s", took.Round(time.Second), err, strings.TrimSpace(errb.String()))
				waitFor(t, 2*time.Minute, func() bool {
					return cp.kubectl(nil, "get", "pod", pod).code != 0
				})
				// Nothing of the session is left: no session open in
				// kubestream (ws, skew, crio), no container of the pod in
				// the node's runtime.
				waitFor(t, time.Minute, func() bool {
					return nodeMetric(t, cp, n, "/metrics", "kubestream_streaming_sessions_active") == 0
				})
				// The kubelet removes the pod's containers after the API
				// object is gone, on its own schedule: a minute is
				// plenty, and a container still there after it is left
				// behind.
				var ps string
				deadline := time.Now().Add(time.Minute)
				for {
					ps = strings.TrimSpace(nodeExec(t, n, "crictl", "ps", "-a", "-q", "--label", "io.kubernetes.pod.name="+pod))
					if ps == "" || time.Now().After(deadline) {
						break
					}
					time.Sleep(2 * time.Second)
				}
				if ps != "" {
					t.Errorf("containers of the deleted pod still on %s a minute after it was gone: %s", n.name, ps)
				}
			})
		}
	})

	// kubestream's own port-forward modes, reverse and UDP, through the
	// apiserver with the kubectl plugin.
	t.Run("port-forward-modes", func(t *testing.T) { kindPortForwardModes(t, kc, nodes) })

	// The faults users meet, on each worker side by side.
	t.Run("faults", func(t *testing.T) { kindFaults(t, kc, nodes) })

	// kubestream node in front of the daemon worker's stock kubelet.
	t.Run("kubestream-node", func(t *testing.T) { kindDaemon(t, kc, nodes) })

	// The stock worker's kubelet replaced by the patched one on the live
	// node (its systemd restarts it with the new binary) while a session
	// to the ws worker goes on: the node stays registered, and kubestream
	// serves it from then on.
	t.Run("rolling-replacement", func(t *testing.T) {
		cp, n := kc(t), nodes["stock"]
		wsPod, stockPod := kindPod(t, cp, "ws"), kindPod(t, cp, "stock")
		stdin, lines, stderr := cp.background(t, true, "attach", "-i", wsPod, "-c", "echo")
		say := func(msg string) {
			fmt.Fprintln(stdin, msg)
			if !lines.Scan() || lines.Text() != "echo: "+msg {
				t.Fatalf("the session to the ws worker read %q (%v), want %q; stderr %s", lines.Text(), lines.Err(), "echo: "+msg, stderr.String())
			}
		}
		say("before the replacement")
		if r := cp.kubectl(nil, "get", "--raw", "/api/v1/nodes/"+n.name+"/proxy/metrics/streaming"); r.code == 0 {
			t.Fatal("the stock kubelet serves kubestream's /metrics/streaming")
		}
		uid := cp.must(nil, "get", "node", n.name, "-o", "jsonpath={.metadata.uid}")
		nodeExec(t, n, "sh", "-c", "ln -sfn /usr/local/bin/kubelet-kubestream /usr/bin/kubelet && systemctl restart kubelet")
		t.Cleanup(func() {
			nodeExec(t, n, "sh", "-c", "ln -sfn /usr/local/bin/kubelet-stock /usr/bin/kubelet && systemctl restart kubelet")
		})
		say("during the replacement")
		waitFor(t, 2*time.Minute, func() bool {
			return cp.kubectl(nil, "get", "--raw", "/api/v1/nodes/"+n.name+"/proxy/metrics/streaming").code == 0
		})
		cp.must(nil, "wait", "--for=condition=Ready", "node/"+n.name, "--timeout=2m")
		if got := cp.must(nil, "get", "node", n.name, "-o", "jsonpath={.metadata.uid}"); got != uid {
			t.Errorf("the node was registered anew (uid %s, was %s)", got, uid)
		}
		after := kindNodes(t, cp)["stock"]
		t.Logf("declaredFeatures before %v, after %v (upstream's v1.37 kubelet declares the same feature)", n.features, after.features)
		if !slices.Contains(after.features, "ExtendWebSocketsToKubelet") {
			t.Errorf("after the replacement the node declares %v", after.features)
		}
		// A restarted kubelet knows its pods once it has synced them from
		// the apiserver (its /exec answers "does not exist" until then, as
		// upstream's does): the first exec is retried until then.
		var r kubectlResult
		waitFor(t, time.Minute, func() bool {
			r = cp.kubectl(nil, "exec", stockPod, "-c", "app", "--", "true")
			return r.code == 0
		})
		before := nodeMetric(t, cp, n, "/metrics/streaming", "kubestream_streaming_requests_total", `route="translated"`)
		if r = cp.kubectl(nil, "exec", stockPod, "-c", "app", "--", "sh", "-c", "echo after; exit 4"); r.code != 4 || r.stdout != "after\n" {
			t.Fatalf("exec after the replacement: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if got := nodeMetric(t, cp, n, "/metrics/streaming", "kubestream_streaming_requests_total", `route="translated"`) - before; before == 0 || got != 1 {
			t.Errorf("kubestream on the replaced kubelet translated %v execs before and %v more for one, want at least 1 and 1", before, got)
		}
		say("after the replacement")
	})

	// A worker's container stopped and started: the node comes back with
	// its identity and volume, the kubelet restarts its pods, and
	// streaming to it works again (each runtime with kubestream's server).
	for _, flavour := range []string{"ws", "crio"} {
		t.Run("node-restart/"+flavour, func(t *testing.T) { kindNodeRestart(t, kc(t), nodes[flavour]) })
	}
}

// kindNodeRestart stops and starts node n's container under a pod of its.
func kindNodeRestart(t *testing.T, cp *controlPlane, n kindNode) {
	pod := kindPod(t, cp, n.flavour)
	for _, args := range [][]string{{"stop", "--time", "10", n.name}, {"start", n.name}} {
		if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
			t.Fatalf("docker %v: %v: %s", args, err, out)
		}
	}
	waitFor(t, 3*time.Minute, func() bool {
		r := cp.kubectl(nil, "exec", pod, "-c", "app", "--", "echo", "back")
		return r.code == 0 && r.stdout == "back\n"
	})
	cp.must(nil, "wait", "--for=condition=Ready", "node/"+n.name, "--timeout=2m")
	kindStreaming(t, cp, pod)
}

// forTest is kubectl against the same cluster for test t: a subtest's
// failures must end its own goroutine.
func (cp *controlPlane) forTest(t *testing.T) *controlPlane {
	return &controlPlane{t: t, bin: cp.bin, kubeconfig: cp.kubeconfig}
}

// kindNodes reads the cluster's nodes by flavour (the label the cluster's
// configuration gives each worker; "control-plane" for the control plane),
// waiting for each to be Ready.
func kindNodes(t *testing.T, cp *controlPlane) map[string]kindNode {
	cp.must(nil, "wait", "--for=condition=Ready", "nodes", "--all", "--timeout=3m")
	var list struct {
		Items []struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Status struct {
				DeclaredFeatures []string `json:"declaredFeatures"`
				Addresses        []struct {
					Type, Address string
				} `json:"addresses"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(cp.must(nil, "get", "nodes", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]kindNode{}
	for _, it := range list.Items {
		n := kindNode{name: it.Metadata.Name, flavour: it.Metadata.Labels["kubestream.io/flavour"], features: it.Status.DeclaredFeatures}
		if _, cpl := it.Metadata.Labels["node-role.kubernetes.io/control-plane"]; cpl {
			n.flavour = "control-plane"
		}
		for _, a := range it.Status.Addresses {
			if a.Type == "InternalIP" {
				n.ip = a.Address
			}
		}
		out[n.flavour] = n
	}
	return out
}

// kindPod runs a pod on the worker of that flavour, from the image built
// here (hack/kind.sh image): app (a shell), echo (answers each line of its
// stdin, for attach), web (a TCP echo server on 8080, for port-forward),
// reset (tcpreset on 9000, which resets a connection on request), log
// (a line every 200 ms, for logs -f) and udp (a UDP echo server on 7000).
// It is deleted when the test ends.
func kindPod(t *testing.T, cp *controlPlane, flavour string) string {
	name := fmt.Sprintf("stream-%s-%d", flavour, time.Now().UnixNano()%1_000_000)
	const image = "docker.io/kubestream/busybox:e2e"
	container := func(name string, stdin bool, cmd ...string) map[string]any {
		return map[string]any{"name": name, "image": image, "imagePullPolicy": "Never", "command": cmd, "stdin": stdin}
	}
	cp.apply(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec": map[string]any{
			"nodeSelector":                  map[string]string{"kubestream.io/flavour": flavour},
			"terminationGracePeriodSeconds": 1,
			"containers": []any{
				container("app", false, "sleep", "3600"),
				container("echo", true, "sh", "-c", `while read -r l; do echo "echo: $l"; done`),
				container("web", false, "tcpecho", "-listen", ":8080"),
				container("reset", false, "tcpreset", "-listen", ":9000"),
				container("log", false, "sh", "-c", `i=0; while :; do i=$((i+1)); echo "line $i"; sleep 0.2; done`),
				container("udp", false, "udpecho", "-listen", ":7000"),
			},
		},
	})
	t.Cleanup(func() { cp.kubectl(nil, "delete", "pod", name, "--grace-period=1", "--wait=false") })
	cp.must(nil, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=3m")
	return name
}

// kindStreaming is what a kubectl user does with a pod: exec (exit codes,
// stdout and stderr apart, half-closed stdin, 200,000 lines), cp both ways
// (64 MiB, compared byte for byte), attach, port-forward (several
// connections at once, then 16 MiB) and logs -f.
func kindStreaming(t *testing.T, cp *controlPlane, pod string) {
	t.Run("exec", func(t *testing.T) {
		cp := cp.forTest(t)
		r := cp.kubectl(nil, "exec", pod, "-c", "app", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
		if r.code != 3 || r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n") {
			t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		in := bytes.Repeat([]byte("half-closed stdin\n"), 100_000)
		r = cp.kubectl(bytes.NewReader(in), "exec", "-i", pod, "-c", "app", "--", "sh", "-c", "wc -c; echo after EOF")
		if r.code != 0 || r.stdout != fmt.Sprintf("%d\nafter EOF\n", len(in)) {
			t.Fatalf("wc -c: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		r = cp.kubectl(nil, "exec", pod, "-c", "app", "--", "seq", "1", "200000")
		if r.code != 0 || r.stdout != seqOutput(200000) {
			t.Fatalf("seq: exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
		}
	})
	t.Run("cp", func(t *testing.T) {
		kubectlCopy(t, cp.forTest(t), pod, 64<<20)
	})
	t.Run("attach", func(t *testing.T) {
		kubectlAttach(t, cp.forTest(t), pod, "echo")
	})
	t.Run("port-forward", func(t *testing.T) {
		forwardAndCheck(t, cp.forTest(t), "pod/"+pod, 8080)
	})
	t.Run("logs", func(t *testing.T) {
		cp := cp.forTest(t)
		_, lines, stderr := cp.background(t, false, "logs", "-f", pod, "-c", "log")
		last := 0
		for range 10 {
			var i int
			if !lines.Scan() {
				t.Fatalf("logs -f ended: %v; stderr %s", lines.Err(), stderr.String())
			}
			if _, err := fmt.Sscanf(lines.Text(), "line %d", &i); err != nil || i != last+1 && last != 0 {
				t.Fatalf("logs -f read %q after line %d", lines.Text(), last)
			}
			last = i
		}
	})
}

// kindCounts are a node's streaming counters: kubestream's sessions by
// route (empty on a stock kubelet), upstream's kubelet counter of
// WebSocket sessions it translated itself, and the runtime's own requests
// by protocol where the runtime runs kubestream's runtime-side server.
type kindCounts struct {
	routes   map[string]float64
	upstream float64
	runtime  map[string]float64
}

func kindMetrics(t *testing.T, cp *controlPlane, n kindNode) kindCounts {
	c := kindCounts{routes: map[string]float64{}}
	// kubestream node serves its own series at /metrics/streaming alone;
	// a patched kubelet has them on /metrics too.
	path := "/metrics"
	if n.flavour == "daemon" {
		path = "/metrics/streaming"
	}
	for _, route := range []string{"direct", "translated", "tunneled", "proxied-spdy", "proxied-websocket"} {
		c.routes[route] = nodeMetric(t, cp, n, path, "kubestream_streaming_requests_total", `route="`+route+`"`)
	}
	c.upstream = nodeMetric(t, cp, n, "/metrics", "kubelet_websocket_streaming_requests_total")
	if n.native() {
		c.runtime = runtimeStreaming(t, n)
	}
	return c
}

// kindRoutes checks who carried the sessions kindStreaming made on node n:
// on ws and crio, kubestream straight through to the runtime's WebSocket
// server (containerd's, CRI-O's), no SPDY on any leg; on skew, kubestream translating to the runtime's SPDY;
// on stock, upstream's kubelet alone.
func kindRoutes(t *testing.T, n kindNode, before, after kindCounts) {
	d := map[string]float64{}
	for r := range after.routes {
		d[r] = after.routes[r] - before.routes[r]
	}
	up := after.upstream - before.upstream
	t.Logf("node %s (%s): kubestream sessions by route %v, upstream's counter +%v", n.name, n.flavour, d, up)
	switch n.flavour {
	case "ws", "crio":
		if d["direct"] < 6 || d["translated"]+d["tunneled"]+d["proxied-spdy"]+d["proxied-websocket"] != 0 {
			t.Errorf("on %s every session goes direct: %v", n.flavour, d)
		}
		// No SPDY on any leg: the runtime's server counted v5 and the
		// port-forward tunnel (WebSocket, named after the SPDY frames it
		// carries, as upstream's is) and nothing else.
		rt := map[string]float64{}
		for p, v := range after.runtime {
			rt[p] = v - before.runtime[p]
		}
		t.Logf("%s's runtime-side server, requests by protocol: %v", n.runtime(), rt)
		for p, v := range rt {
			if p != "v5.channel.k8s.io" && p != "SPDY/3.1+portforward.k8s.io" && v > 0 {
				t.Errorf("%s served %v requests over %s", n.runtime(), v, p)
			}
		}
		if rt["v5.channel.k8s.io"] == 0 || rt["SPDY/3.1+portforward.k8s.io"] == 0 {
			t.Errorf("%s's server counted %v", n.runtime(), rt)
		}
	case "skew", "daemon":
		if d["translated"] < 6 || d["tunneled"] < 1 || d["direct"] != 0 {
			t.Errorf("on %s kubestream translates to the runtime's SPDY: %v", n.flavour, d)
		}
		// On daemon, kubestream node takes the sessions before the
		// kubelet, whose own counter stays where it was.
		if n.flavour == "daemon" && up != 0 {
			t.Errorf("on daemon the stock kubelet behind kubestream counted %v WebSocket sessions", up)
		}
	case "stock":
		if sum := d["direct"] + d["translated"] + d["tunneled"] + d["proxied-spdy"] + d["proxied-websocket"]; sum != 0 || up < 6 {
			t.Errorf("on stock upstream's kubelet carries every session: kubestream %v, upstream's counter +%v", d, up)
		}
	}
}

// nodeMetric sums a node's samples of name with every label given, read
// through the apiserver's node proxy as a scraper would; a path the
// kubelet does not serve counts 0.
func nodeMetric(t *testing.T, cp *controlPlane, n kindNode, path, name string, labels ...string) float64 {
	t.Helper()
	r := cp.kubectl(nil, "get", "--raw", "/api/v1/nodes/"+n.name+"/proxy"+path)
	if r.code != 0 {
		return 0
	}
	return sumSamples(t, r.stdout, name, labels...)
}

// kindCrictlWebSocket: crictl's own WebSocket transport on the node, straight
// at the runtime's streaming server (no kubelet): served over v5 by the
// runtime-side server in containerd and in CRI-O alike, exit code included.
func kindCrictlWebSocket(t *testing.T, n kindNode, pod string) {
	id := strings.TrimSpace(nodeExec(t, n, "crictl", "ps", "-q", "--name", "^app$", "--label", "io.kubernetes.pod.name="+pod))
	if id == "" {
		t.Fatalf("no app container of %s on %s", pod, n.name)
	}
	before := runtimeStreaming(t, n)
	out, err := exec.Command("docker", "exec", n.name, "crictl", "exec", "-r", "websocket", id,
		"sh", "-c", "echo over websocket; exit 3").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "over websocket") || !strings.Contains(string(out), "exit code 3") {
		t.Fatalf("crictl exec -r websocket on %s: %v: %s", n.name, err, out)
	}
	after := runtimeStreaming(t, n)
	if d := after["v5.channel.k8s.io"] - before["v5.channel.k8s.io"]; d != 1 {
		t.Errorf("%s's server counted %v v5 sessions for one crictl exec (%v)", n.runtime(), d, after)
	}
}

// runtimeStreaming reads the runtime-side server's requests by protocol
// from the runtime's metrics endpoint on the node's address (the cluster's
// own Docker network; hack/kind/files/config.toml and crio.conf).
func runtimeStreaming(t *testing.T, n kindNode) map[string]float64 {
	path := "/v1/metrics" // containerd's
	if n.runtime() == "crio" {
		path = "/metrics"
	}
	return runtimeStreamingRequestsAt(t, "http://"+net.JoinHostPort(n.ip, "1338")+path)
}

// nodeExec runs a command in the node's container, as kind does.
func nodeExec(t *testing.T, n kindNode, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", append([]string{"exec", n.name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec %s %v: %v: %s", n.name, args, err, out)
	}
	return string(out)
}
