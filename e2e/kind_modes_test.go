// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kind

package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubestream/kubestream/internal/wiretest"
)

// kindPortForwardModes: kubestream's reverse and UDP port-forward
// (docs/port-forward-modes.md) through the cluster's unchanged apiserver,
// with the kubectl plugin as a user runs it (`kubectl kubestream …`, found
// on PATH), on each worker whose kubelet runs kubestream; the stock
// worker's kubelet must be named as the reason it fails.
func kindPortForwardModes(t *testing.T, kc func(*testing.T) *controlPlane, nodes map[string]kindNode) {
	plugin := buildPlugin(t)
	for _, flavour := range kindFlavours {
		t.Run(flavour, func(t *testing.T) {
			cp, n := kc(t), nodes[flavour]
			pod := kindPod(t, cp, flavour)
			// kubestream node serves the modes as the patched kubelet
			// does: hack/kind/node adds manifests/node's
			// port-forward-modes component.
			if flavour == "stock" {
				modesOnStock(t, cp, plugin, n, pod)
				return
			}
			t.Run("reverse", func(t *testing.T) { reverseHTTP(t, cp.forTest(t), plugin, pod) })
			t.Run("reverse-killed", func(t *testing.T) { reverseKilled(t, cp.forTest(t), plugin, n, pod) })
			t.Run("port-in-use", func(t *testing.T) { reversePortInUse(t, cp.forTest(t), plugin, pod) })
			t.Run("udp", func(t *testing.T) { udpThroughPod(t, cp.forTest(t), plugin, pod) })
			t.Run("pod-deleted", func(t *testing.T) { reversePodDeleted(t, cp.forTest(t), plugin, flavour) })
		})
	}
	t.Run("rbac", func(t *testing.T) { modesRBAC(t, kc(t), plugin, kindPod(t, kc(t), "ws")) })
	t.Run("operator", func(t *testing.T) { kindModesOperator(t, kc(t), plugin, nodes["ws"]) })
}

// buildPlugin builds cmd/kubectl-kubestream into a directory of its own,
// which plugin commands put first on PATH.
func buildPlugin(t *testing.T) string {
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-kubestream"), "../cmd/kubectl-kubestream").CombinedOutput()
	if err != nil {
		t.Fatalf("building the plugin: %v: %s", err, out)
	}
	return dir
}

// pluginCmd is `kubectl kubestream ARGS…` with the plugin on PATH and the
// cluster's kubeconfig (kubectl hands a plugin its environment, not its
// flags).
func pluginCmd(ctx context.Context, cp *controlPlane, plugin, kubeconfig string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(cp.bin, "kubectl"), append([]string{"kubestream"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+plugin+":"+os.Getenv("PATH"))
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// startPlugin starts a port-forward through the plugin and waits for its
// "Forwarding from" line for each mapping; the process is killed when the
// test ends.
func startPlugin(t *testing.T, cp *controlPlane, plugin string, mappings int, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := pluginCmd(ctx, cp, plugin, cp.kubeconfig, args...)
	lines, stderr := startCommand(t, cmd, cancel)
	for ready := 0; ready < mappings; {
		if !lines.Scan() {
			t.Fatalf("kubectl kubestream %v ended before forwarding: %s", args, stderr.String())
		}
		if strings.HasPrefix(lines.Text(), "Forwarding from") {
			ready++
		}
	}
	go func() { // the rest of its output ("Handling connection for …")
		for lines.Scan() {
		}
	}()
	return cmd, stderr
}

// echoPathServer serves each request's path back on a local port, and
// resets the first connection when reset is set; it counts connections.
func echoPathServer(t *testing.T, reset bool) (port int, conns *atomic.Int32) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := &resetFirst{Listener: l, reset: reset}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "body of %s\n", r.URL.Path)
	})}
	go srv.Serve(rl) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port, &rl.conns
}

// resetFirst is a listener that resets the first connection it accepts
// (when reset is set) and hands on the others.
type resetFirst struct {
	net.Listener
	reset bool
	conns atomic.Int32
}

func (l *resetFirst) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.conns.Add(1) != 1 || !l.reset {
			return c, err
		}
		_ = c.(*net.TCPConn).SetLinger(0) // a reset is the point
		c.Close()
	}
}

// reverseHTTP: a local HTTP server behind the pod's
// 127.0.0.1:9090, fetched 100 times by the pod, 10 at once, every body
// checked; then a local service that resets its first connection, behind
// 9091: that fetch fails alone, the next ones through the same listener
// are answered.
func reverseHTTP(t *testing.T, cp *controlPlane, plugin, pod string) {
	web, _ := echoPathServer(t, false)
	flaky, flakyConns := echoPathServer(t, true)
	startPlugin(t, cp, plugin, 2, "port-forward", "--reverse", pod, fmt.Sprintf("9090:%d", web), fmt.Sprintf("9091:%d", flaky))
	script := `for i in $(seq 10); do (for j in $(seq 10); do wget -q -O - http://127.0.0.1:9090/r$i-$j || echo "failed r$i-$j"; done) & done; wait`
	r := cp.kubectl(nil, "exec", pod, "-c", "app", "--", "sh", "-c", script)
	got := strings.Count(r.stdout, "body of /r")
	for i := 1; i <= 10; i++ {
		for j := 1; j <= 10; j++ {
			if !strings.Contains(r.stdout, fmt.Sprintf("body of /r%d-%d\n", i, j)) {
				t.Errorf("request r%d-%d: no body", i, j)
			}
		}
	}
	if r.code != 0 || got != 100 {
		t.Fatalf("100 fetches through the reverse forward: %d bodies, exit %d, stderr %q", got, r.code, r.stderr)
	}
	r = cp.kubectl(nil, "exec", pod, "-c", "app", "--", "sh", "-c",
		`wget -q -O - http://127.0.0.1:9091/first || echo "first failed"; for i in 1 2 3; do wget -q -O - http://127.0.0.1:9091/after$i; done`)
	if !strings.Contains(r.stdout, "first failed") || strings.Count(r.stdout, "body of /after") != 3 {
		t.Fatalf("a local service that reset its first connection: stdout %q, stderr %q, %d connections; want the first to fail alone", r.stdout, r.stderr, flakyConns.Load())
	}
	t.Logf("100 of 100 bodies through pod:9090; the reset connection failed alone, 3 of 3 after it answered")
}

// reverseKilled (c): the plugin killed with SIGKILL: the pod's port is
// closed within seconds, and no descriptor of its listener is left in the
// kubelet (the socket's inode, read in the pod's network namespace, no
// longer among the kubelet's open files).
func reverseKilled(t *testing.T, cp *controlPlane, plugin string, n kindNode, pod string) {
	web, _ := echoPathServer(t, false)
	cmd, _ := startPlugin(t, cp, plugin, 1, "port-forward", "--reverse", pod, fmt.Sprintf("9092:%d", web))
	inode := listenerInode(t, cp, pod, 9092)
	if inode == "" {
		t.Fatal("no listener on the pod's port 9092 while the plugin runs")
	}
	if !streamerHolds(t, n, inode) {
		t.Fatalf("the pod's listener (socket %s) is not %s's", inode, n.streamer())
	}
	_ = cmd.Process.Kill()
	start := time.Now()
	waitFor(t, 30*time.Second, func() bool { return listenerInode(t, cp, pod, 9092) == "" && !streamerHolds(t, n, inode) })
	t.Logf("the pod's port closed and %s's descriptor gone %s after SIGKILL", n.streamer(), time.Since(start).Round(100*time.Millisecond))
}

// listenerInode is the inode of the socket listening on port in the pod's
// network namespace ("" when none), from its /proc/net/tcp.
func listenerInode(t *testing.T, cp *controlPlane, pod string, port int) string {
	r := cp.kubectl(nil, "exec", pod, "-c", "app", "--", "cat", "/proc/net/tcp")
	if r.code != 0 {
		t.Fatalf("reading the pod's sockets: %s", r.stderr)
	}
	local := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		// sl local rem st ... inode: st 0A is LISTEN.
		if len(f) > 9 && strings.HasSuffix(f[1], local) && f[3] == "0A" {
			return f[9]
		}
	}
	return ""
}

// streamerHolds says whether the node's kubestream (the kubelet, or
// kubestream node's processes on daemon) has socket inode open.
func streamerHolds(t *testing.T, n kindNode, inode string) bool {
	out := nodeExec(t, n, "sh", "-c", "for p in $(pidof "+n.streamer()+"); do ls -l /proc/$p/fd; done 2>/dev/null | grep -c 'socket:\\["+inode+"\\]' || true")
	c, _ := strconv.Atoi(strings.TrimSpace(out))
	return c > 0
}

// reversePortInUse (e): the pod's tcpecho holds 8080; a reverse forward
// of it fails at once with a clear error, and nothing is left listening
// for it.
func reversePortInUse(t *testing.T, cp *controlPlane, plugin, pod string) {
	before := listenerInode(t, cp, pod, 8080)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := pluginCmd(ctx, cp, plugin, cp.kubeconfig, "port-forward", "--reverse", pod, "8080:1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use") {
		t.Fatalf("reverse forward of a port in use: %v: %s", err, out)
	}
	if after := listenerInode(t, cp, pod, 8080); after != before {
		t.Errorf("the pod's listener on 8080 changed: %s, was %s", after, before)
	}
	t.Logf("port in use: %s", strings.TrimSpace(string(out)))
}

// udpThroughPod (f): 1,000 datagrams of mixed sizes up to 64 KiB through
// the plugin's local UDP port to the pod's udpecho, each answered whole
// (none merged or split).
func udpThroughPod(t *testing.T, cp *controlPlane, plugin, pod string) {
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	local := l.LocalAddr().(*net.UDPAddr).Port
	l.Close()
	startPlugin(t, cp, plugin, 1, "port-forward", "--udp", pod, fmt.Sprintf("%d:7000", local))
	c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", local))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64<<10)
	sizes := []int{1, 512, 1400, 1472, 9000, 32 << 10, 65000, 65507}
	var prev []byte
	for i := range 1000 {
		size := sizes[i%len(sizes)] - i%7
		if size < 1 {
			size = 1
		}
		msg := make([]byte, size)
		_, _ = rand.Read(msg)
		if err := wiretest.UDPRoundTrip(c, msg, prev, 2*time.Second, buf); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		prev = msg
	}
	t.Logf("1,000 datagrams of up to 65,507 bytes each answered whole")
}

// reversePodDeleted (d): the pod deleted under a reverse forward: the
// plugin exits non-zero and says the pod was deleted.
func reversePodDeleted(t *testing.T, cp *controlPlane, plugin, flavour string) {
	pod := kindPod(t, cp, flavour)
	web, _ := echoPathServer(t, false)
	cmd, stderr := startPlugin(t, cp, plugin, 1, "port-forward", "--reverse", pod, fmt.Sprintf("9093:%d", web))
	cp.must(nil, "delete", "pod", pod, "--grace-period=1", "--wait=false")
	start := time.Now()
	err := cmd.Wait()
	if err == nil || !strings.Contains(stderr.String(), "deleted") {
		t.Fatalf("the plugin after its pod's deletion: %v, stderr %q; want a non-zero exit saying so", err, stderr.String())
	}
	t.Logf("plugin after the pod's deletion (%s): %s", time.Since(start).Round(time.Second), strings.TrimSpace(stderr.String()))
}

// modesOnStock: a stock kubelet is named as the reason, for both modes.
func modesOnStock(t *testing.T, cp *controlPlane, plugin string, n kindNode, pod string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for mode, args := range map[string][]string{
		"reverse port-forward": {"--reverse", pod, "9090:1"},
		"UDP port-forward":     {"--udp", pod, "17000:7000"},
	} {
		out, err := pluginCmd(ctx, cp, plugin, cp.kubeconfig, append([]string{"port-forward"}, args...)...).CombinedOutput()
		want := fmt.Sprintf("node %s does not serve %s: its kubelet runs without kubestream, or its operator left the mode off", n.name, mode)
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("%s on the stock worker: %v: %q; want %q", mode, err, out, want)
		}
	}
}

// modesRBAC (g): a user who may get pods/portforward but not create it is
// refused by the apiserver, as for kubectl port-forward.
func modesRBAC(t *testing.T, cp *controlPlane, plugin, pod string) {
	const sa = "kubestream-modes-getonly"
	cp.must(nil, "create", "serviceaccount", sa)
	cp.must(nil, "create", "role", sa, "--verb=get,list", "--resource=pods,pods/portforward")
	cp.must(nil, "create", "rolebinding", sa, "--role="+sa, "--serviceaccount=default:"+sa)
	t.Cleanup(func() {
		cp.kubectl(nil, "delete", "rolebinding,role,serviceaccount", sa)
	})
	token := strings.TrimSpace(cp.must(nil, "create", "token", sa))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := cp.must(nil, "config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.server} {.clusters[0].cluster.certificate-authority-data}")
	server, ca, _ := strings.Cut(cfg, " ")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: kind, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: %s, user: {token: %q}}]
contexts: [{name: %s, context: {cluster: kind, user: %s, namespace: default}}]
current-context: %s
`, server, ca, sa, token, sa, sa, sa)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := pluginCmd(ctx, cp, plugin, kubeconfig, "port-forward", "--reverse", pod, "9094:1").CombinedOutput()
	if err == nil || !strings.Contains(strings.ToLower(string(out)), "forbidden") {
		t.Fatalf("reverse forward without create on pods/portforward: %v: %s", err, out)
	}
	t.Logf("without create on pods/portforward: %s", strings.TrimSpace(string(out)))
}
