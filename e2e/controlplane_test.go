// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build apiserver || kubelet || kind

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubestream/kubestream/internal/pki"
)

// nodeName is the Node the tests register or the kubelet registers.
const nodeName = "kubestream-node"

// controlPlane is a real etcd and kube-apiserver (built by hack/kube.sh)
// with kubectl configured as a cluster admin. The apiserver holds the
// kubelet client credentials of node, as it would for a real kubelet.
type controlPlane struct {
	t          *testing.T
	bin, dir   string
	url        string
	kubeconfig string
	auditLog   string // the apiserver's, streaming subresources only
	certs      *pki.ControlPlaneFiles
	procs      []*process
}

type process struct {
	name    string
	cmd     *exec.Cmd
	log     string
	done    chan error
	stopped bool // stopProcess ran
}

// kubeBin is where hack/kube.sh put kube-apiserver, kubectl and etcd.
func kubeBin(t *testing.T) string {
	dir := os.Getenv("KUBESTREAM_KUBE_BIN")
	if dir == "" {
		t.Fatal("KUBESTREAM_KUBE_BIN is not set: run these tests with `make test-apiserver` (hack/apiserver-e2e.sh)")
	}
	for _, b := range []string{"kube-apiserver", "kubectl", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Fatalf("%s missing: %v (hack/kube.sh install builds it)", b, err)
		}
	}
	return dir
}

// givenPorts are the ports freePort handed out: the kernel may offer a
// port again once its probe listener closed, and etcd binds its peer port
// only some time after it starts, so the apiserver's could be the same
// (CI once failed with "address already in use" that way).
var givenPorts = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

func freePort(t *testing.T) int {
	t.Helper()
	givenPorts.Lock()
	defer givenPorts.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !givenPorts.m[port] {
			givenPorts.m[port] = true
			return port
		}
	}
}

func startControlPlane(t *testing.T, node *pki.Files) *controlPlane {
	t.Helper()
	cp := &controlPlane{t: t, bin: kubeBin(t), dir: t.TempDir()}
	certs, err := pki.WriteControlPlaneSet(cp.dir)
	if err != nil {
		t.Fatal(err)
	}
	cp.certs = certs
	t.Cleanup(cp.stop)

	etcdPort := freePort(t)
	client := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	cp.start("etcd", "--data-dir", filepath.Join(cp.dir, "etcd"), "--log-level", "error",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default="+peer)

	// The apiserver's own audit log, for streaming subresources only: what
	// the node's records are joined to (TestAPIServer/audit-join).
	policy := filepath.Join(cp.dir, "audit-policy.yaml")
	cp.auditLog = filepath.Join(cp.dir, "apiserver-audit.log")
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: "", resources: [pods/exec, pods/attach, pods/portforward]}]
- level: None
`), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cp.url = fmt.Sprintf("https://127.0.0.1:%d", port)
	cp.start("kube-apiserver",
		"--audit-policy-file="+policy, "--audit-log-path="+cp.auditLog,
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdPort),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file="+certs.ServerCert, "--tls-private-key-file="+certs.ServerKey,
		"--client-ca-file="+certs.CA, "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+certs.ServiceAccountKey,
		"--service-account-signing-key-file="+certs.ServiceAccountKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// What a cluster gives the apiserver to reach its kubelets: here the
		// kubestream nodes' CA and the client pair they trust.
		"--kubelet-client-certificate="+node.ClientCert, "--kubelet-client-key="+node.ClientKey,
		"--kubelet-certificate-authority="+node.CA,
		"--kubelet-preferred-address-types=InternalIP",
		// A loopback advertise address and no service accounts controller.
		"--endpoint-reconciler-type=none", "--disable-admission-plugins=ServiceAccount",
		"--v=2")
	cp.waitReady(90 * time.Second)

	cp.kubeconfig = filepath.Join(cp.dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %q, certificate-authority: %q}
users:
- name: admin
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: e2e
  context: {cluster: e2e, user: admin, namespace: default}
current-context: e2e
`, cp.url, certs.CA, certs.AdminCert, certs.AdminKey)
	if err := os.WriteFile(cp.kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return cp
}

func (cp *controlPlane) start(name string, args ...string) *process {
	return cp.startIn(nil, name, args...)
}

// startIn starts the binary name through the command prefix (which execs
// it in the end, so the process is the binary's).
func (cp *controlPlane) startIn(prefix []string, name string, args ...string) *process {
	cp.t.Helper()
	p := &process{name: name, log: filepath.Join(cp.dir, name+".log"), done: make(chan error, 1)}
	f, err := os.Create(p.log)
	if err != nil {
		cp.t.Fatal(err)
	}
	argv := append(append(slices.Clone(prefix), filepath.Join(cp.bin, name)), args...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		cp.t.Fatalf("starting %s: %v", name, err)
	}
	go func() { p.done <- p.cmd.Wait(); f.Close() }()
	cp.procs = append(cp.procs, p)
	return p
}

// stop ends the processes newest first; their logs are shown when the test
// failed.
func (cp *controlPlane) stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.stopProcess(cp.procs[i])
	}
	cp.procs = nil
}

// stopProcess ends p (SIGTERM, then SIGKILL after 20 s), once.
func (cp *controlPlane) stopProcess(p *process) {
	if p.stopped {
		return
	}
	p.stopped = true
	terminate(p.cmd, p.done, 20*time.Second)
	if cp.t.Failed() {
		cp.showLog(p)
	}
}

func (cp *controlPlane) showLog(p *process) {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	cp.t.Logf("--- last lines of %s:\n%s", p.name, strings.Join(lines, "\n"))
}

func (cp *controlPlane) httpClient() *http.Client {
	pair, err := tls.LoadX509KeyPair(cp.certs.AdminCert, cp.certs.AdminKey)
	if err != nil {
		cp.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(cp.certs.CA)
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}
}

func (cp *controlPlane) waitReady(d time.Duration) {
	cp.t.Helper()
	c := cp.httpClient()
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(d)
	for {
		for _, p := range cp.procs {
			select {
			case err := <-p.done:
				p.done <- err
				cp.showLog(p)
				cp.t.Fatalf("%s exited: %v", p.name, err)
			default:
			}
		}
		resp, err := c.Get(cp.url + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("%s: %s", resp.Status, body)
		}
		if time.Now().After(deadline) {
			cp.t.Fatalf("kube-apiserver not ready after %v: %v", d, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// kubectlResult is one finished kubectl run.
type kubectlResult struct {
	stdout, stderr string
	code           int
}

// kubectl runs kubectl against the control plane and waits for it.
func (cp *controlPlane) kubectl(stdin io.Reader, args ...string) kubectlResult {
	cp.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := cp.kubectlCmd(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	res := kubectlResult{stdout: out.String(), stderr: errb.String()}
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	default:
		cp.t.Fatalf("kubectl %v: %v", args, err)
	}
	return res
}

func (cp *controlPlane) kubectlCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(cp.bin, "kubectl"), append([]string{"--kubeconfig", cp.kubeconfig}, args...)...)
	// kubectl reads these to pick its streaming protocols; the defaults
	// (WebSockets first, SPDY fallback) are what users run.
	cmd.Env = append(os.Environ(), "KUBECTL_REMOTE_COMMAND_WEBSOCKETS=", "KUBECTL_PORT_FORWARD_WEBSOCKETS=")
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// must runs kubectl and fails the test unless it succeeded.
func (cp *controlPlane) must(stdin io.Reader, args ...string) string {
	cp.t.Helper()
	r := cp.kubectl(stdin, args...)
	if r.code != 0 {
		cp.t.Fatalf("kubectl %v: exit %d: %s", args, r.code, r.stderr)
	}
	return r.stdout
}

func (cp *controlPlane) apply(obj any) {
	cp.t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		cp.t.Fatal(err)
	}
	cp.must(bytes.NewReader(b), "apply", "-f", "-")
}

func (cp *controlPlane) patchStatus(kind, name string, status any) {
	cp.t.Helper()
	b, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		cp.t.Fatal(err)
	}
	cp.must(nil, "patch", kind, name, "--subresource=status", "--type=merge", "-p", string(b))
}

// apiserverMetric sums the apiserver's samples of name whose label set
// contains every label in want.
func (cp *controlPlane) apiserverMetric(name string, want map[string]string) float64 {
	cp.t.Helper()
	var labels []string
	for k, v := range want {
		labels = append(labels, fmt.Sprintf("%s=%q", k, v))
	}
	return sumSamples(cp.t, cp.must(nil, "get", "--raw", "/metrics"), name, labels...)
}

// sumSamples sums the samples of name in a Prometheus text exposition
// (`name{a="b",...} value`, or `name value`) whose labels include every one
// given (`a="b"`).
func sumSamples(t *testing.T, exposition, name string, labels ...string) float64 {
	t.Helper()
	var total float64
next:
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		var f float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &f); err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		total += f
	}
	return total
}

func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)

// background starts kubectl for a command that runs until stopped (attach,
// port-forward) and stops it, as a user's Ctrl-C would, when the test ends.
// It returns kubectl's stdin (nil unless asked), its stdout by lines, and
// its stderr.
func (cp *controlPlane) background(t *testing.T, withStdin bool, args ...string) (io.WriteCloser, *bufio.Scanner, *syncBuffer) {
	t.Helper()
	_, stdin, lines, stderr := cp.startKubectl(t, withStdin, args...)
	return stdin, lines, stderr
}

// startKubectl is background with kubectl's command, for a test that
// waits for its end itself.
func (cp *controlPlane) startKubectl(t *testing.T, withStdin bool, args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Scanner, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := cp.kubectlCmd(ctx, args...)
	var stdin io.WriteCloser
	var err error
	if withStdin {
		if stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	lines, stderr := startCommand(t, cmd, cancel)
	return cmd, stdin, lines, stderr
}

// startCommand starts cmd with its stdout read by the returned scanner and
// its stderr kept; it is killed, waited for and its context cancelled when
// the test ends.
func startCommand(t *testing.T, cmd *exec.Cmd, cancel context.CancelFunc) (*bufio.Scanner, *syncBuffer) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); cancel() })
	return bufio.NewScanner(stdout), stderr
}

// portForward starts kubectl port-forward to port of target, for the
// test's life, and returns the local port it printed and its stderr.
func (cp *controlPlane) portForward(t *testing.T, target string, port int) (uint16, *syncBuffer) {
	t.Helper()
	_, lines, stderr := cp.background(t, false, "port-forward", "--address", "127.0.0.1", target, fmt.Sprintf(":%d", port))
	var local uint16
	for local == 0 && lines.Scan() {
		if m := forwarding.FindStringSubmatch(lines.Text()); m != nil {
			p, _ := strconv.Atoi(m[1])
			local = uint16(p)
		}
	}
	if local == 0 {
		t.Fatalf("kubectl port-forward printed no local port: %v; stderr %s", lines.Err(), stderr.String())
	}
	go func() { // keep draining "Handling connection" lines
		for lines.Scan() {
		}
	}()
	return local, stderr
}

// forwardAndCheck runs kubectl port-forward to port of target and checks
// an echo through it, then a bulk transfer.
func forwardAndCheck(t *testing.T, cp *controlPlane, target string, port int) {
	local, stderr := cp.portForward(t, target, port)
	// Several connections at once share the one port-forward session.
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			errs <- echoCheck(local, []byte(strings.Repeat(fmt.Sprintf("connection %d through kubectl port-forward ", i), 500)))
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("%v; stderr %s", err, stderr.String())
		}
	}
	if err := bulkEcho(local, 16<<20); err != nil {
		t.Fatalf("%v; stderr %s", err, stderr.String())
	}
}

// kubectlCopy copies a file of size bytes into container app of pod and
// back with kubectl cp (tar over exec, stdin closed at the end of the
// archive).
func kubectlCopy(t *testing.T, cp *controlPlane, pod string, size int) {
	dir := t.TempDir()
	src := filepath.Join(dir, "in.bin")
	data := make([]byte, size)
	_, _ = rand.Read(data)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	remote := fmt.Sprintf("/tmp/kubestream-cp-%d", time.Now().UnixNano())
	cp.must(nil, "cp", src, "default/"+pod+":"+remote, "-c", "app")
	defer cp.kubectl(nil, "exec", pod, "-c", "app", "--", "rm", "-f", remote)
	back := filepath.Join(dir, "back.bin")
	cp.must(nil, "cp", "default/"+pod+":"+remote, back, "-c", "app")
	got, err := os.ReadFile(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("kubectl cp round trip: %d bytes back, want the same %d", len(got), len(data))
	}
}

// kubectlAttach attaches to a container that answers each line it reads
// with "echo: " and the line.
func kubectlAttach(t *testing.T, cp *controlPlane, pod, container string) {
	stdin, lines, stderr := cp.background(t, true, "attach", "-i", pod, "-c", container)
	for i := 0; i < 3; i++ {
		msg := fmt.Sprintf("through the apiserver %d", i)
		fmt.Fprintln(stdin, msg)
		if !lines.Scan() || lines.Text() != "echo: "+msg {
			t.Fatalf("attach read %q (%v), want %q; stderr %s", lines.Text(), lines.Err(), "echo: "+msg, stderr.String())
		}
	}
}
