// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kind

package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// daemonPassThroughCost measures what the rest of the kubelet API costs
// through kubestream node: /stats/summary and /metrics/resource (median
// and 90th-percentile latency of 40 requests over one connection) and a
// 4 MiB container log read whole, at the daemon worker's kubelet port
// (kubestream node) beside the stock worker's (the same kubelet alone), as
// the apiserver asks them; then kubestream node's memory and CPU at idle.
// Logged (docs/node.md keeps the figures), not asserted: the two nodes
// share two cores with the rest of the cluster.
func daemonPassThroughCost(t *testing.T, cp *controlPlane, nodes map[string]kindNode, apiserver tls.Certificate) {
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{apiserver}}}}
	logPods := map[string]string{}
	for _, f := range []string{"daemon", "stock"} {
		name := fmt.Sprintf("biglog-%s-%d", f, time.Now().UnixNano()%1_000_000)
		cp.apply(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name, "namespace": "default"},
			"spec": map[string]any{"nodeSelector": map[string]string{"kubestream.io/flavour": f}, "terminationGracePeriodSeconds": 1,
				"containers": []any{map[string]any{"name": "log", "image": "docker.io/kubestream/busybox:e2e", "imagePullPolicy": "Never",
					"command": []string{"sh", "-c", "yes kubestream-pass-through-cost-$(head -c 150 /dev/zero | tr '\\0' x) | head -c 4194304; sleep 3600"}}}}})
		t.Cleanup(func() { cp.kubectl(nil, "delete", "pod", name, "--grace-period=1", "--wait=false") })
		logPods[f] = name
	}
	for _, name := range logPods {
		cp.must(nil, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=3m")
	}

	var b strings.Builder
	b.WriteString("| path | daemon: through kubestream node | stock: the kubelet alone |\n|---|---|---|\n")
	for _, path := range []string{"/stats/summary", "/metrics/resource"} {
		row := map[string]string{}
		for _, f := range []string{"daemon", "stock"} {
			var took []time.Duration
			size := 0
			for range 40 {
				start := time.Now()
				resp, err := client.Get("https://" + net.JoinHostPort(nodes[f].ip, "10250") + path)
				if err != nil {
					t.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				took = append(took, time.Since(start))
				size = int(n)
			}
			slices.Sort(took)
			row[f] = fmt.Sprintf("median %s, p90 %s (%d KiB)", took[len(took)/2].Round(100*time.Microsecond), took[len(took)*9/10].Round(100*time.Microsecond), size/1024)
		}
		fmt.Fprintf(&b, "| GET %s | %s | %s |\n", path, row["daemon"], row["stock"])
	}
	row := map[string]string{}
	for _, f := range []string{"daemon", "stock"} {
		var n int64
		var took time.Duration
		// Read whole once the container has written all of it.
		waitFor(t, 2*time.Minute, func() bool {
			start := time.Now()
			resp, err := client.Get("https://" + net.JoinHostPort(nodes[f].ip, "10250") + "/containerLogs/default/" + logPods[f] + "/log")
			if err != nil {
				t.Fatal(err)
			}
			n, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			took = time.Since(start)
			return resp.StatusCode == http.StatusOK && n >= 4<<20-1024 // the last line, cut, is not logged
		})
		row[f] = fmt.Sprintf("%d MiB in %s, %.0f MiB/s", n>>20, took.Round(time.Millisecond), float64(n)/(1<<20)/took.Seconds())
	}
	fmt.Fprintf(&b, "| GET /containerLogs (a 4 MiB log of 200-byte lines, whole below the kubelet's 10 MiB rotation) | %s | %s |\n", row["daemon"], row["stock"])
	t.Logf("the kubelet API through kubestream node and from the kubelet alone:\n%s", b.String())
	t.Logf("kubestream node at idle on the daemon worker: %s", idleCost(t, nodes["daemon"]))
}

// idleCost is kubestream node's resident memory and the CPU it used over
// 30 s with no request, read from /proc on the node.
func idleCost(t *testing.T, n kindNode) string {
	pid := kubestreamPIDs(t, n)
	if len(pid) == 0 {
		return "no kubestream node process found"
	}
	ticks := func() int {
		f := strings.Fields(nodeExec(t, n, "cat", "/proc/"+pid[0]+"/stat"))
		u, _ := strconv.Atoi(f[13])
		s, _ := strconv.Atoi(f[14])
		return u + s
	}
	before := ticks()
	time.Sleep(30 * time.Second)
	used := ticks() - before
	rss := nodeExec(t, n, "sh", "-c", "grep VmRSS /proc/"+pid[0]+"/status")
	return fmt.Sprintf("%s, CPU %d ms in 30 s (pid %s of %v)", strings.Join(strings.Fields(rss), " "), used*10, pid[0], pid)
}

// kubestreamPIDs lists the node's kubestream node processes (by their
// command line, which begins with the binary: not this shell's); a
// process gone while the loop reads it says nothing (stderr is dropped,
// as nodeExec returns it with stdout).
func kubestreamPIDs(t *testing.T, n kindNode) []string {
	find := `for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline 2>/dev/null | grep -q '^/usr/local/bin/kubestream node' && echo ${p#/proc/}; done 2>/dev/null; true`
	return strings.Fields(nodeExec(t, n, "sh", "-c", find))
}
