// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kubelet

package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubestream/kubestream/internal/pki"
	"github.com/kubestream/kubestream/internal/sysctls"
)

// kubeletMinor is the minor version of the kubelet under test
// (KUBESTREAM_KUBELET_VERSION, v1.37.2 when unset).
func kubeletMinor(t *testing.T) int {
	v := os.Getenv("KUBESTREAM_KUBELET_VERSION")
	if v == "" {
		return 37
	}
	f := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(f) == 3 {
		if m, err := strconv.Atoi(f[1]); err == nil {
			return m
		}
	}
	t.Fatalf("KUBESTREAM_KUBELET_VERSION=%q is not vMAJOR.MINOR.PATCH", v)
	return 0
}

// kubeletBinary is the patched kubelet under test: kubelet-kubestream
// (v1.37.2), or another version's (hack/kubelet-e2e.sh sets it).
func kubeletBinary() string {
	if b := os.Getenv("KUBESTREAM_KUBELET_BINARY"); b != "" {
		return b
	}
	return "kubelet-kubestream"
}

// TestKubelet runs kubectl through a real kube-apiserver v1.37.2 to the
// upstream kubelet v1.37.2 (or v1.36.3 or v1.35.4: KUBESTREAM_KUBELET_VERSION,
// a skew of one or two minors) with kubestream linked in (hack/kube/kubelet*),
// in front of a real containerd. Nothing is faked: the kubelet registers its
// node and declares ExtendWebSocketsToKubelet itself (v1.35.4: kubestream's
// gate, declared through the node-declared-features registry), runs the pod
// through CRI and reports it running; the apiserver reads the declaration
// and passes kubectl's WebSockets through; kubestream serves them inside
// the kubelet.
func TestKubelet(t *testing.T) {
	endpoint := os.Getenv("KUBESTREAM_KUBELET_RUNTIME")
	image := os.Getenv("KUBESTREAM_E2E_IMAGE")
	if endpoint == "" || image == "" {
		t.Fatal("KUBESTREAM_KUBELET_RUNTIME and KUBESTREAM_E2E_IMAGE are not set: run this with hack/kubelet-e2e.sh")
	}
	t.Run("bad-kubestream-config", func(t *testing.T) {
		// kubestream's own file is checked before the kubelet starts
		// anything, and the error names the field, as for the kubelet's.
		bad := filepath.Join(t.TempDir(), "kubestream.yaml")
		_ = os.WriteFile(bad, []byte("apiVersion: kubestream.io/v1alpha1\nkind: StreamingConfiguration\nruntimeWebSocketStreaming: sometimes\n"), 0o600)
		bin, _ := exec.Command("../hack/kube.sh", "bin").Output()
		cmd := exec.Command(filepath.Join(strings.TrimSpace(string(bin)), kubeletBinary()), "--kubestream-config", bad, "--v=2")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), `runtimeWebSocketStreaming: Unsupported value: "sometimes"`) {
			t.Fatalf("kubelet with a bad kubestream configuration: %v\n%s", err, out)
		}
	})

	n := kubeletNode(t, endpoint, image, kubeletBinary(), true, kubeletOpts{})
	cp, kubeletMetric, ip, port, certs := n.cp, n.metric, n.ip, n.port, n.certs
	// Against a containerd that serves WebSockets itself (the patched
	// build, hack/containerd.sh 2.4-ws) every session goes straight
	// through, with no SPDY on any leg; against stock containerd the node
	// translates and tunnels.
	rc, pf := "translated", "tunneled"
	if chainWebSockets() {
		rc, pf = "direct", "direct"
	}
	streaming := func(route string) float64 {
		return kubeletMetric("/metrics/streaming", "kubestream_streaming_requests_total", `route="`+route+`"`)
	}

	t.Run("exec", func(t *testing.T) {
		r := cp.kubectl(nil, "exec", "shell", "-c", "app", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
		if r.code != 3 || r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n") {
			t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		data := make([]byte, 2<<20)
		_, _ = rand.Read(data)
		r = cp.kubectl(bytes.NewReader(data), "exec", "-i", "shell", "-c", "app", "--", "wc", "-c")
		if r.code != 0 || strings.TrimSpace(r.stdout) != strconv.Itoa(len(data)) {
			t.Fatalf("wc -c: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		r = cp.kubectl(nil, "exec", "shell", "-c", "app", "--", "seq", "1", "200000")
		if r.code != 0 || r.stdout != seqOutput(200000) {
			t.Fatalf("seq: exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
		}
		if got := streaming(rc); got < 3 {
			t.Fatalf("kubestream in the kubelet carried %v exec sessions by route %s, want 3", got, rc)
		}
		if got := cp.apiserverMetric("apiserver_websocket_streaming_requests_total", map[string]string{"subresource": "exec", "proxy_type": "proxied_to_kubelet"}); got < 3 {
			t.Fatalf("the apiserver passed %v exec WebSockets to the kubelet, want 3", got)
		}
	})

	t.Run("cp", func(t *testing.T) {
		before := streaming(rc)
		kubectlCopy(t, cp, "shell", 5<<20+123)
		if streaming(rc) <= before {
			t.Fatal("kubectl cp did not go through kubestream in the kubelet")
		}
	})

	t.Run("attach", func(t *testing.T) {
		before := streaming(rc)
		kubectlAttach(t, cp, "shell", "echo")
		if streaming(rc) <= before {
			t.Fatal("kubectl attach did not go through kubestream in the kubelet")
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		// A host-network pod's port-forward reaches the host's loopback.
		forwardAndCheck(t, cp, "pod/shell", tcpEcho(t))
		if got := kubeletMetric("/metrics/streaming", "kubestream_streaming_requests_total", `subresource="portforward"`, `route="`+pf+`"`); got != 1 {
			t.Fatalf("kubestream in the kubelet carried %v port-forwards by route %s, want 1", got, pf)
		}
	})

	// The kubelet's streamingConnectionIdleTimeout (8s here) governs
	// kubestream inside it: an exec that goes quiet is closed by the node,
	// and kubectl says why.
	t.Run("idle-timeout", func(t *testing.T) {
		start := time.Now()
		r := cp.kubectl(nil, "exec", "shell", "-c", "app", "--", "sleep", "60")
		took := time.Since(start)
		if r.code == 0 || !strings.Contains(r.stderr, "session idle for 8s, closed by the node") || took < 7*time.Second || took > 30*time.Second {
			t.Fatalf("quiet exec: exit %d after %s, stderr %q; want it closed after 8s idle", r.code, took.Round(time.Second), r.stderr)
		}
	})

	// Inside the kubelet, kubestream's series are on the kubelet's own
	// /metrics beside upstream's kubelet_websocket_streaming_requests_total,
	// which still counts what the kubelet's own translator would have;
	// the configuration file's direct mode never means no offers at all.
	t.Run("metrics", func(t *testing.T) {
		const ks, up = "kubestream_streaming_requests_total", "kubelet_websocket_streaming_requests_total"
		beforeKS := kubeletMetric("/metrics", ks, `subresource="exec"`, `route="`+rc+`"`)
		beforeUp := kubeletMetric("/metrics", up, `subresource="exec"`)
		for i := 0; i < 2; i++ {
			if r := cp.kubectl(nil, "exec", "shell", "-c", "app", "--", "true"); r.code != 0 {
				t.Fatalf("exec: %d %s", r.code, r.stderr)
			}
		}
		if d := kubeletMetric("/metrics", ks, `subresource="exec"`, `route="`+rc+`"`) - beforeKS; d != 2 {
			t.Errorf("%s on the kubelet's /metrics rose by %v for 2 execs", ks, d)
		}
		// The v1.35 kubelet has no such counter: the series must be absent
		// rather than invented.
		want := 2.0
		if kubeletMinor(t) < 36 {
			want = 0
		}
		if d := kubeletMetric("/metrics", up, `subresource="exec"`) - beforeUp; d != want {
			t.Errorf("%s rose by %v for 2 execs, want %v", up, d, want)
		}
		// Over the whole run, upstream's counter and kubestream's agree on
		// every WebSocket session kubestream carried.
		for _, sub := range []string{"exec", "attach", "portforward"} {
			if kubeletMinor(t) < 36 {
				break
			}
			route := `route="` + rc + `"`
			if sub == "portforward" {
				route = `route="` + pf + `"`
			}
			k, u := kubeletMetric("/metrics", ks, `subresource="`+sub+`"`, route), kubeletMetric("/metrics", up, `subresource="`+sub+`"`)
			if k == 0 || k != u {
				t.Errorf("%s: kubestream counted %v WebSocket sessions, upstream's counter %v", sub, k, u)
			}
		}
		offers := kubeletMetric("/metrics", "kubestream_runtime_websocket_offers_total")
		if !chainWebSockets() && offers != 0 {
			t.Errorf("%v direct offers with runtimeWebSocketStreaming: never", offers)
		}
		if chainWebSockets() {
			// No SPDY anywhere: the node translated nothing, passed no
			// SPDY through, and the runtime's own server counted only
			// v5 and the tunnel.
			for _, route := range []string{"translated", "tunneled", "proxied-spdy", "proxied-websocket"} {
				if n := kubeletMetric("/metrics", ks, `route="`+route+`"`); n != 0 {
					t.Errorf("%v sessions by route %s against a runtime that speaks WebSockets", n, route)
				}
			}
			if refused := kubeletMetric("/metrics", "kubestream_runtime_websocket_offers_total", `result="refused"`); refused != 0 || offers == 0 {
				t.Errorf("direct offers: %v, refused %v", offers, refused)
			}
			byProtocol := runtimeStreamingRequests(t)
			for p, n := range byProtocol {
				if p != "v5.channel.k8s.io" && p != "SPDY/3.1+portforward.k8s.io" && n > 0 {
					t.Errorf("the runtime served %v requests over %s", n, p)
				}
			}
			if byProtocol["v5.channel.k8s.io"] == 0 || byProtocol["SPDY/3.1+portforward.k8s.io"] == 0 {
				t.Errorf("the runtime's own metrics: %v", byProtocol)
			}
			t.Logf("the runtime's streaming requests by protocol: %v", byProtocol)
		}
		out := cp.must(nil, "get", "--raw", "/api/v1/nodes/"+nodeName+"/proxy/metrics")
		if !strings.Contains(out, "# HELP "+ks+" [ALPHA]") {
			t.Errorf("the kubelet's /metrics lacks %s with its stability level", ks)
		}
	})

	// The audit log the configuration file asked for: the exec subtest's
	// sessions are on record with the apiserver as the caller and their
	// exit codes.
	t.Run("audit", func(t *testing.T) {
		var exit3 int
		for _, e := range auditLog(t, filepath.Join(cp.dir, "kubelet", "kubestream-audit.log")) {
			if e.Stage == "ResponseComplete" && e.ObjectRef.Subresource == "exec" && e.ExitCode != nil && *e.ExitCode == 3 &&
				e.Route == rc && e.User.Username == "kube-apiserver-kubelet-client" && e.ObjectRef.Name == "shell" {
				exit3++
			}
		}
		if exit3 == 0 {
			t.Fatal("the kubelet's audit log has no record of the exec that exited 3")
		}
	})

	// The kubelet's own filter asks get of nodes/proxy for a WebSocket
	// upgrade; kubestream inside it asks the kubelet's authorizer again,
	// for create. A user granted get only (a monitoring agent's usual
	// grant) cannot exec, attach or port-forward on the kubelet directly,
	// over WebSocket or SPDY; a user granted create can; kubectl through
	// the apiserver (whose kubelet client may create) works throughout.
	t.Run("authorization", func(t *testing.T) {
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
		mon := grantNodeProxy(t, cp, certs, "monitoring", "get")
		op := grantNodeProxy(t, cp, certs, "operator", "get", "create")
		for _, c := range streamingRequests("shell", "app", "shell", "echo") {
			// RBAC changes reach the kubelet's 1 s authorization cache.
			waitFor(t, 10*time.Second, func() bool {
				status, _, _ := rawUpgradeAt(t, addr, certs.CA, op, c.method, c.path, c.hdr)
				return status == http.StatusSwitchingProtocols
			})
			if status, _, body := rawUpgradeAt(t, addr, certs.CA, mon, c.method, c.path, c.hdr); status != http.StatusForbidden || !strings.Contains(body, "verb=create") {
				t.Errorf("%s with get nodes/proxy only: %d %q, want 403 asking for create", c.name, status, body)
			}
		}
		if r := cp.kubectl(nil, "exec", "shell", "-c", "app", "--", "echo", "through the apiserver"); r.code != 0 || r.stdout != "through the apiserver\n" {
			t.Errorf("kubectl exec: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})
}

// kubeletNode starts the control plane and the kubelet binary (kubestream
// linked in and configured, or stock) in front of the runtime at endpoint,
// waits for its node to declare ExtendWebSocketsToKubelet and for a pod
// "shell" (containers app and echo) to run, and returns the control plane
// and a reader of the kubelet's metrics: the sum of the samples of name
// whose labels include every one given, from the kubelet's /metrics (or
// /metrics/streaming) read through the apiserver's node proxy, as a
// scraper would.
func kubeletNode(t *testing.T, endpoint, image, binary string, kubestream bool, o kubeletOpts) *kubeletRun {
	t.Helper()
	// A kubelet refuses a loopback node IP, so it serves on the machine's.
	ip := hostIP(t)
	certs, err := pki.WriteNodeSet(t.TempDir(), "kube-apiserver-kubelet-client", ip)
	if err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, certs)
	port := cp.startKubelet(certs, endpoint, ip, binary, kubestream, o)

	// The apiserver learns of the kubelet's support from the node it
	// registered, not from us. A stock v1.35 kubelet knows nothing of
	// the feature: its node is ready without declaring it.
	if kubestream || kubeletMinor(t) >= 36 {
		waitFor(t, 2*time.Minute, func() bool {
			r := cp.kubectl(nil, "get", "node", nodeName, "-o", "jsonpath={.status.declaredFeatures}")
			return r.code == 0 && strings.Contains(r.stdout, "ExtendWebSocketsToKubelet")
		})
	} else {
		waitFor(t, 2*time.Minute, func() bool {
			r := cp.kubectl(nil, "get", "node", nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			return r.code == 0 && r.stdout == "True"
		})
		if got := cp.must(nil, "get", "node", nodeName, "-o", "jsonpath={.status.declaredFeatures}"); strings.Contains(got, "ExtendWebSocketsToKubelet") {
			t.Fatalf("a stock v1.35 node declares %s", got)
		}
	}
	if got := cp.must(nil, "get", "node", nodeName, "-o", "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}"); got != strconv.Itoa(port) {
		t.Fatalf("node reports kubelet port %s, want %d", got, port)
	}
	if want := os.Getenv("KUBESTREAM_KUBELET_VERSION"); want != "" {
		if got := cp.must(nil, "get", "node", nodeName, "-o", "jsonpath={.status.nodeInfo.kubeletVersion}"); got != want {
			t.Fatalf("node runs kubelet %s, want %s", got, want)
		}
	}

	cp.apply(map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "shell", "namespace": "default"},
		"spec": map[string]any{"nodeName": nodeName, "hostNetwork": true, "terminationGracePeriodSeconds": 1,
			"containers": []map[string]any{
				{"name": "app", "image": image, "imagePullPolicy": "Never", "command": []string{"sleep", "3600"}},
				// attach needs a process reading the container's own stdin,
				// which the kubelet asks the runtime for (stdin: true).
				{"name": "echo", "image": image, "imagePullPolicy": "Never", "stdin": true,
					"command": []string{"sh", "-c", `while read -r l; do echo "echo: $l"; done`}},
			}}})
	t.Cleanup(func() { cp.kubectl(nil, "delete", "pod", "shell", "--wait=false") })
	waitFor(t, 2*time.Minute, func() bool {
		return cp.kubectl(nil, "get", "pod", "shell", "-o", "jsonpath={.status.phase}").stdout == "Running"
	})

	return &kubeletRun{cp: cp, ip: ip, port: port, certs: certs, metric: func(path, name string, labels ...string) float64 {
		return sumSamples(t, cp.must(nil, "get", "--raw", "/api/v1/nodes/"+nodeName+"/proxy"+path), name, labels...)
	}}
}

// kubeletOpts change the node's settings from the tests' own: the bench
// holds sessions open far longer than the tests' 8 s idle timeout.
type kubeletOpts struct {
	idleTimeout string // the kubelet's streamingConnectionIdleTimeout
	kubestream  string // appended to kubestream's configuration file
}

// kubeletRun is a running node: its control plane, the kubelet's address,
// the node's certificates and the kubelet's metrics reader.
type kubeletRun struct {
	cp     *controlPlane
	ip     net.IP
	port   int
	certs  *pki.Files
	metric func(path, name string, labels ...string) float64
}

// startKubelet runs the kubelet binary against the control plane and the
// runtime at endpoint (with kubestream's configuration file when it has
// kubestream linked in) and returns its port.
func (cp *controlPlane) startKubelet(node *pki.Files, endpoint string, ip net.IP, binary string, kubestream bool, o kubeletOpts) int {
	cp.t.Helper()
	dir := filepath.Join(cp.dir, "kubelet")
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		cp.t.Fatal(err)
	}
	port := freePort(cp.t)
	featureGates := map[string]bool{"KubeletInUserNamespace": true}
	if kubestream && kubeletMinor(cp.t) == 35 {
		// v1.35's node declares features only with this alpha gate on;
		// without it the apiserver translates (docs/kubelet.md: kubelets of other
		// versions).
		featureGates["NodeDeclaredFeatures"] = true
	}
	cfg := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		"address": ip.String(), "port": port, "readOnlyPort": 0, "healthzPort": 0,
		"tlsCertFile": node.ServerCert, "tlsPrivateKeyFile": node.ServerKey,
		"authentication": map[string]any{"x509": map[string]string{"clientCAFile": node.CA},
			"webhook": map[string]bool{"enabled": false}, "anonymous": map[string]bool{"enabled": false}},
		// The cluster decides, by SubjectAccessReview (RBAC on nodes/proxy).
		"authorization": map[string]any{"mode": "Webhook",
			"webhook": map[string]string{"cacheAuthorizedTTL": "1s", "cacheUnauthorizedTTL": "1s"}},
		"containerRuntimeEndpoint": endpoint,
		"podLogsDir":               filepath.Join(dir, "logs"),
		// No systemd, cgroup v1 on this machine, a small shared disk: a
		// kubelet that only runs pods, without QoS cgroups or evictions.
		"cgroupDriver": "cgroupfs", "cgroupsPerQOS": false, "enforceNodeAllocatable": []string{},
		"failCgroupV1": false, "failSwapOn": false, "localStorageCapacityIsolation": false,
		"evictionHard":                map[string]string{"memory.available": "0%", "nodefs.available": "0%", "imagefs.available": "0%"},
		"imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
		"nodeStatusUpdateFrequency": "2s", "resolvConf": "",
		"featureGates": featureGates,
		// kubestream must honour the kubelet's own setting (the idle-timeout
		// test); every other test keeps data flowing well within it.
		"streamingConnectionIdleTimeout": cmp.Or(o.idleTimeout, "8s"),
	}
	b, _ := json.Marshal(cfg)
	cfgFile := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		cp.t.Fatal(err)
	}
	// The admin's identity: the Node authorizer and NodeRestriction are
	// not what this test is about.
	kc := filepath.Join(dir, "kubeconfig")
	data, err := os.ReadFile(cp.kubeconfig)
	if err != nil {
		cp.t.Fatal(err)
	}
	if err := os.WriteFile(kc, data, 0o600); err != nil {
		cp.t.Fatal(err)
	}
	args := []string{"--config", cfgFile, "--kubeconfig", kc,
		"--root-dir", filepath.Join(dir, "root"), "--hostname-override", nodeName, "--node-ip", ip.String(), "--v=2"}
	if !kubestream {
		cp.startKubeletProcess(dir, binary, args)
		return port
	}
	// What the kubelet has no field for comes from kubestream's own file.
	ksFile := filepath.Join(dir, "kubestream.yaml")
	mode := "never"
	if chainWebSockets() {
		mode = "auto"
	}
	ks := "apiVersion: kubestream.io/v1alpha1\nkind: StreamingConfiguration\nruntimeWebSocketStreaming: " + mode + "\n" +
		"auditLogPath: " + filepath.Join(dir, "kubestream-audit.log") + "\n" + o.kubestream
	if err := os.WriteFile(ksFile, []byte(ks), 0o600); err != nil {
		cp.t.Fatal(err)
	}
	cp.startKubeletProcess(dir, binary, append(args, "--kubestream-config", ksFile))
	return port
}

// kubeletTunables are the kernel settings a kubelet sets when they differ,
// with the values it wants: hack/kubelet-tunables, which the kind node's
// entrypoint reads too.
func kubeletTunables(t *testing.T) map[string]string {
	b, err := os.ReadFile("../hack/kubelet-tunables")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			out[f[0]] = f[1]
		}
	}
	if len(out) != 6 {
		t.Fatalf("hack/kubelet-tunables names %d settings, want the kubelet's 6", len(out))
	}
	return out
}

// startKubeletProcess runs the kubelet in a mount namespace of its own in
// which node-local files holding kubeletTunables' values cover those
// entries of /proc/sys: the kubelet finds them as it wants them and writes
// nothing to the host's kernel (with them uncovered it set five of the six
// on this machine, kernel.panic_on_oops among them). /proc is made private
// there first, so that on a host whose mounts are shared (systemd's) the
// covers stay in that namespace. The kubelet's directory is made a shared
// mount out here first, so the volumes the kubelet mounts under its root
// directory reach containerd, which runs in this namespace. The cleanup
// stops the kubelet, then fails the test naming any kernel setting that
// differs from before it started, then unmounts what it left.
func (cp *controlPlane) startKubeletProcess(dir, binary string, args []string) {
	t := cp.t
	t.Helper()
	before, err := sysctls.Snapshot(sysctls.Root)
	if err != nil {
		t.Fatal(err)
	}
	covers := filepath.Join(dir, "sysctl")
	if err := os.MkdirAll(covers, 0o755); err != nil {
		t.Fatal(err)
	}
	mounts := []string{}
	for key, v := range kubeletTunables(t) {
		f := filepath.Join(covers, strings.ReplaceAll(key, "/", "."))
		if err := os.WriteFile(f, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mounts = append(mounts, f, filepath.Join(sysctls.Root, key))
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting the kubelet's directory: %v", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("sharing the kubelet's directory: %v", err)
	}
	const script = `set -e
mount --make-rprivate /proc
while [ "$1" != -- ]; do mount --bind "$1" "$2"; shift 2; done
shift
exec "$@"`
	prefix := append([]string{"unshare", "--mount", "--propagation", "unchanged", "--", "sh", "-c", script, "sh"}, mounts...)
	p := cp.startIn(append(prefix, "--"), binary, args...)
	t.Cleanup(func() {
		cp.stopProcess(p)
		after, err := sysctls.Snapshot(sysctls.Root)
		if err != nil {
			t.Error(err)
		}
		// net.* here is this test's network namespace's, the kubelet's to
		// change; the Makefile's guard, outside it, checks the host's.
		for k := range before {
			if strings.HasPrefix(k, "net.") {
				delete(before, k)
			}
		}
		for _, c := range sysctls.Diff(before, after) {
			t.Errorf("the kubelet changed the machine's kernel setting %s", c)
		}
		// At --v=2 the kubelet logs each tunable it finds otherwise than
		// it wants, before it writes it: with the covers, none.
		if b, err := os.ReadFile(p.log); err != nil || bytes.Contains(b, []byte("Updating kernel flag")) {
			t.Errorf("the kubelet tried to set a kernel setting (or its log is unreadable: %v); see %s", err, p.log)
		}
		// The kubelet bind-mounts its root directory (and pods' volumes)
		// and leaves the mounts when it stops; the temporary directory
		// needs them gone.
		unmountUnder(t, dir)
	})
}

// hostIP is the first non-loopback IPv4 address: the node's, on the veth
// interface of the network namespace hack/kubelet-e2e.sh runs this in.
func hostIP(t *testing.T) net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.To4()
		}
	}
	t.Fatal("no non-loopback IPv4 address for the kubelet")
	return nil
}

// unmountUnder lazily unmounts every mount point below dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			points = append(points, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", p, err)
		}
	}
}

// clientCert is a user's certificate and key from the cluster's CA.
type clientCert struct{ cert, key string }

// grantNodeProxy makes a user with a certificate from the node set's CA and
// binds it to verbs on nodes/proxy.
func grantNodeProxy(t *testing.T, cp *controlPlane, certs *pki.Files, name string, verbs ...string) clientCert {
	t.Helper()
	ca, err := pki.LoadCA(certs.CA, certs.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.WriteClient(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	cp.apply(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": name + "-node-proxy"},
		"rules":    []map[string]any{{"apiGroups": []string{""}, "resources": []string{"nodes/proxy"}, "verbs": verbs}}})
	cp.apply(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": name + "-node-proxy"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name + "-node-proxy"},
		"subjects": []map[string]any{{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}}})
	return clientCert{cert, key}
}

// rawUpgradeAt sends one upgrade request to addr as user and returns the
// answer's status, headers and body (the connection is dropped after).
func rawUpgradeAt(t *testing.T, addr, caFile string, user clientCert, method, path string, hdr http.Header) (int, http.Header, string) {
	t.Helper()
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(ca)
	pair, err := tls.LoadX509KeyPair(user.cert, user.key)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req, _ := http.NewRequest(method, "https://"+addr+path, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(body)
}

// chainWebSockets reports whether the kubelet's containerd is the build
// with kubestream's runtime-side server (hack/containerd.sh up 2.4-ws).
func chainWebSockets() bool { return os.Getenv("KUBESTREAM_CONTAINERD_WEBSOCKETS") == "1" }

// TestKubeletStock is the comparison: the same kubelet version built stock
// (hack/kube.sh kubelet-stock: upstream's source, or for v1.36 and v1.35
// the patched source with the hook unset, so exactly upstream's behaviour), behind the same v1.37.2 apiserver, on the
// same containerd. From v1.36 it declares ExtendWebSocketsToKubelet itself,
// the apiserver passes kubectl's WebSockets through, and the kubelet's own
// translator (upstream's, over SPDY to the runtime) serves them: upstream's
// counter counts. A v1.35 kubelet declares nothing: the apiserver
// translates to SPDY and tunnels port-forward itself, and the kubelet
// relays SPDY. Either way kubectl works and no kubestream series exists.
func TestKubeletStock(t *testing.T) {
	endpoint := os.Getenv("KUBESTREAM_KUBELET_RUNTIME")
	image := os.Getenv("KUBESTREAM_E2E_IMAGE")
	if endpoint == "" || image == "" {
		t.Fatal("KUBESTREAM_KUBELET_RUNTIME and KUBESTREAM_E2E_IMAGE are not set: run this with hack/kubelet-e2e.sh")
	}
	n := kubeletNode(t, endpoint, image, kubeletBinary(), false, kubeletOpts{})
	cp := n.cp
	const up = "kubelet_websocket_streaming_requests_total"
	// Where the apiserver should put each WebSocket: through to the
	// kubelet, or translated by itself.
	proxy, other := "proxied_to_kubelet", "translated_at_apiserver"
	if kubeletMinor(t) < 36 {
		proxy, other = other, proxy
	}
	apiserver := func(sub, proxyType string) float64 {
		return cp.apiserverMetric("apiserver_websocket_streaming_requests_total", map[string]string{"subresource": sub, "proxy_type": proxyType})
	}
	before := n.metric("/metrics", up, `subresource="exec"`)
	execs, execsOther, forwards := apiserver("exec", proxy), apiserver("exec", other), apiserver("portforward", proxy)

	r := cp.kubectl(nil, "exec", "shell", "-c", "app", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	if r.code != 3 || r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n") {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = cp.kubectl(nil, "exec", "shell", "-c", "app", "--", "seq", "1", "200000")
	if r.code != 0 || r.stdout != seqOutput(200000) {
		t.Fatalf("seq: exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
	}
	forwardAndCheck(t, cp, "pod/shell", tcpEcho(t))

	if d := apiserver("exec", proxy) - execs; d != 2 {
		t.Errorf("the apiserver counted %v exec WebSockets as %s for 2 execs", d, proxy)
	}
	if d := apiserver("exec", other) - execsOther; d != 0 {
		t.Errorf("the apiserver counted %v exec WebSockets as %s", d, other)
	}
	if d := apiserver("portforward", proxy) - forwards; d < 1 {
		t.Errorf("the apiserver counted no port-forward as %s", proxy)
	}
	wantUp := 2.0
	if kubeletMinor(t) < 36 {
		wantUp = 0 // no translator, no counter: the kubelet relays SPDY
	}
	if d := n.metric("/metrics", up, `subresource="exec"`) - before; d != wantUp {
		t.Errorf("the kubelet's own translator counted %v exec WebSockets for 2 execs, want %v", d, wantUp)
	}
	if kubeletMinor(t) >= 36 && n.metric("/metrics", up, `subresource="portforward"`) < 1 {
		t.Errorf("the kubelet's own tunnel counted no port-forward")
	}
	if out := cp.must(nil, "get", "--raw", "/api/v1/nodes/"+nodeName+"/proxy/metrics"); strings.Contains(out, "kubestream_") {
		t.Errorf("a stock kubelet exposes kubestream series")
	}
}
