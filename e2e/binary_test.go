// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubestream/kubestream/internal/pki"
)

// TestBinary runs the built kubestream: serve with kubelet-style flags,
// then the exec client subcommand against it, as a human or script would.
func TestBinary(t *testing.T) {
	if rt.endpoint != "" {
		t.Log("serving on the runtime under test: ", rt.name)
	}
	b := serveBinary(t, nil)
	bin, certs, url, serve, exited, serveLog := b.bin, b.certs, b.url, b.cmd, b.exited, &b.log

	run := func(stdin string, args ...string) (string, string, int) {
		full := append([]string{args[0], "--server", url, "--client-certificate", certs.ClientCert,
			"--client-key", certs.ClientKey, "--certificate-authority", certs.CA}, args[1:]...)
		cmd := exec.Command(bin, full...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}
	// Flags after the pod, then the command after --, kubectl style.
	out, errOut, code := run("from the binary\n", "exec", "demo", "-c", "app", "-i", "-v=1", "--", "sh", "-c", "cat; exit 3")
	if out != "from the binary\n" || code != 3 || !strings.Contains(errOut, `protocol="websocket"`) {
		t.Fatalf("exec: stdout %q exit %d stderr %q", out, code, errOut)
	}
	out, errOut, code = run("", "exec", "demo", "-c", "app", "--protocol=spdy", "-v=1", "--", "echo", "over spdy")
	if out != "over spdy\n" || code != 0 || !strings.Contains(errOut, `protocol="spdy"`) {
		t.Fatalf("exec over spdy: stdout %q exit %d stderr %q", out, code, errOut)
	}
	_, errOut, code = run("", "exec", "nope", "-c", "app", "--", "true")
	if code == 0 || !strings.Contains(errOut, "not found") {
		t.Fatalf("exec in an unknown pod: exit %d stderr %q", code, errOut)
	}

	// port-forward: a local port, printed kubectl-style, reaches the pod.
	echoPort := tcpEcho(t)
	pf := exec.Command(bin, "port-forward", "--server", url, "--client-certificate", certs.ClientCert,
		"--client-key", certs.ClientKey, "--certificate-authority", certs.CA, "-v=1", "demo", fmt.Sprintf("0:%d", echoPort))
	pfOut, _ := pf.StdoutPipe()
	var pfErr bytes.Buffer
	pf.Stderr = &pfErr
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(pfOut).ReadString('\n')
	var local int
	if _, scanErr := fmt.Sscanf(line, "Forwarding from 127.0.0.1:%d ->", &local); err != nil || scanErr != nil {
		_ = pf.Process.Kill()
		_ = pf.Wait()
		t.Fatalf("port-forward printed %q (%v, %v)\n%s", line, err, scanErr, pfErr.String())
	}
	roundTrip(t, uint16(local), []byte("through the port-forward subcommand"))
	_ = pf.Process.Signal(syscall.SIGTERM)
	_ = pf.Wait()
	if !strings.Contains(pfErr.String(), `protocol="auto"`) {
		t.Errorf("port-forward -v=1 did not log its protocol: %s", pfErr.String())
	}

	// SIGTERM ends serve promptly and cleanly.
	_ = serve.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("serve exited with %v\n%s", err, serveLog.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM\n%s", serveLog.String())
	}
}

// binaryNode is the built kubestream serving on the reference runtime (or
// the runtime under test).
type binaryNode struct {
	bin, url string
	certs    *pki.Files
	cmd      *exec.Cmd
	exited   chan error
	log      bytes.Buffer
}

// terminate ends a child process: SIGTERM, then SIGKILL after grace;
// exited yields its Wait.
func terminate(cmd *exec.Cmd, exited <-chan error, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// serveBinary builds kubestream and runs serve (under wrapper, e.g. prlimit,
// when given) with extra flags, and waits for /healthz.
func serveBinary(t *testing.T, wrapper []string, extra ...string) *binaryNode {
	t.Helper()
	dir := t.TempDir()
	b := &binaryNode{bin: filepath.Join(dir, "kubestream"), exited: make(chan error, 1)}
	if out, err := exec.Command("go", "build", "-o", b.bin, "../cmd/kubestream").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	certs, err := pki.WriteNodeSet(dir, "kube-apiserver-kubelet-client")
	if err != nil {
		t.Fatal(err)
	}
	b.certs = certs
	pods := filepath.Join(dir, "pods.json")
	podsJSON, _ := json.Marshal(testPods)
	_ = os.WriteFile(pods, podsJSON, 0o600)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := []string{"serve", "--address=127.0.0.1", fmt.Sprintf("--port=%d", port),
		"--tls-cert-file=" + certs.ServerCert, "--tls-private-key-file=" + certs.ServerKey,
		"--client-ca-file=" + certs.CA, "--reference-pods-file=" + pods,
		"--feature-gates=ExtendWebSocketsToKubelet=true", "--streaming-connection-idle-timeout=1h"}
	if rt.endpoint != "" {
		args = append(args, "--container-runtime-endpoint="+rt.endpoint)
	}
	args = append(append([]string{b.bin}, args...), extra...)
	args = append(append([]string{}, wrapper...), args...)
	b.cmd = exec.Command(args[0], args[1:]...)
	b.cmd.Stdout, b.cmd.Stderr = &b.log, &b.log
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.exited <- b.cmd.Wait() }()
	// SIGTERM first: serve then stops its reference runtime, which removes
	// its socket directory (a SIGKILL left one in /tmp per run).
	t.Cleanup(func() { terminate(b.cmd, b.exited, 10*time.Second) })
	b.url = fmt.Sprintf("https://127.0.0.1:%d", port)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	waitFor(t, 30*time.Second, func() bool {
		resp, err := client.Get(b.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	client.CloseIdleConnections()
	return b
}
