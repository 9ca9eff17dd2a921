// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package redirect

import (
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubestream/kubestream/internal/nstest"
)

// run runs a command in the namespace at ns.
func run(t *testing.T, ns string, args ...string) {
	t.Helper()
	if out, err := exec.Command("nsenter", append([]string{"--net=" + ns}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("nsenter %v: %v: %s", args, err, out)
	}
}

// serveName listens on addr in ns and answers each connection with name.
func serveName(t *testing.T, ns, addr, name string) {
	t.Helper()
	var l net.Listener
	nstest.Do(t, ns, func() {
		var err error
		if l, err = net.Listen("tcp", addr); err != nil {
			t.Error(err)
		}
	})
	if l == nil {
		t.FailNow()
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, name)
			c.Close()
		}
	}()
}

// whoAnswers dials addr from ns and returns what the server said.
func whoAnswers(t *testing.T, ns, addr string) string {
	t.Helper()
	var got string
	nstest.Do(t, ns, func() {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			got = "dial: " + err.Error()
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got = string(b)
	})
	return got
}

// TestRedirectCarriesTraffic: a node and a client namespace joined by a
// veth pair. With the redirect, the client's connections to the node's
// kubelet port reach kubestream's; the node's own (to loopback, and to its
// own address) still reach the kubelet; after Remove, the client's reach
// the kubelet again.
func TestRedirectCarriesTraffic(t *testing.T) {
	node, client := nstest.Bound(t), nstest.Bound(t)
	holder := exec.Command("nsenter", "--net="+client, "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	run(t, node, "ip", "link", "add", "ks-node", "type", "veth", "peer", "name", "ks-client", "netns", strconv.Itoa(holder.Process.Pid))
	run(t, node, "ip", "addr", "add", "10.250.0.1/30", "dev", "ks-node")
	run(t, node, "ip", "link", "set", "ks-node", "up")
	run(t, client, "ip", "addr", "add", "10.250.0.2/30", "dev", "ks-client")
	run(t, client, "ip", "link", "set", "ks-client", "up")
	serveName(t, node, "0.0.0.0:10250", "kubelet")
	serveName(t, node, "0.0.0.0:10260", "kubestream")
	if got := whoAnswers(t, client, "10.250.0.1:10250"); got != "kubelet" {
		t.Fatalf("before the redirect the client reached %q", got)
	}
	fd, err := unix.Open(node, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	in, err := Install(Rule{From: 10250, To: 10260, Owner: "traffic", RunDir: filepath.Join(t.TempDir(), "run"), NetNS: fd})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, addr, want string }{
		{client, "10.250.0.1:10250", "kubestream"},
		{node, "127.0.0.1:10250", "kubelet"},
		{node, "10.250.0.1:10250", "kubelet"},
	} {
		if got := whoAnswers(t, c.from, c.addr); got != c.want {
			t.Errorf("with the redirect, %s from %s reached %q, want %q", c.addr, map[string]string{node: "the node", client: "the client"}[c.from], got, c.want)
		}
	}
	if err := in.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := whoAnswers(t, client, "10.250.0.1:10250"); got != "kubelet" {
		t.Errorf("after Remove the client reached %q", got)
	}
}
