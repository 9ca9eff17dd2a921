// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubestream/kubestream/cri"
)

// The floors' names in the tables.
const (
	rawRuntimeFloor = "floor: raw TCP from the runtime's process, no protocol"
	rawChainFloor   = "reference: raw TCP through a byte-copying relay"
)

// orchestrateRuntime (-only runtime) measures the runtime side, each
// process on its own so its CPU is its own:
//
//	runtime figures   client-go straight at the runtime's URL: SPDY to
//	                  cri-streaming's server against v5 to kubestream's
//	                  runtime-side server (cri/streaming), same bench runtime
//	chain figures     client-go's v5 executor through a node to a runtime,
//	                  the node's CPU being the translator's and the
//	                  runtime's together: upstream's translator over
//	                  cri-streaming, kubestream translating over
//	                  cri-streaming, kubestream splicing to kubestream's
//	                  runtime-side server (no SPDY anywhere)
//
// and, for scale, the runtime's floor (raw bytes, no protocol) and the
// same through a byte-copying relay.
func orchestrateRuntime(o options) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "kubestream-bench-runtime-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var st started
	defer st.stop()
	backends, clients, err := startRuntimeBackends(ctx, o, dir, &st)
	if err != nil {
		return err
	}
	rt := []runtimePath{
		{&path{name: "cri-streaming, SPDY", cri: clients["cri-streaming"]}, []*child{backends["cri-streaming"]}},
		{&path{name: "kubestream runtime, v5", cri: clients["kubestream"], v5: true}, []*child{backends["kubestream"]}},
	}
	chain, err := startChain(dir, backends, clients, &st)
	if err != nil {
		return err
	}
	floors, err := startFloors(dir, backends, &st)
	if err != nil {
		return err
	}
	figs := runtimeFigs{}
	for rep := 0; rep < o.reps; rep++ {
		for _, p := range append(append([]runtimePath{}, rt...), chain...) {
			if err := figs.measure(ctx, p, o, rep); err != nil {
				return err
			}
		}
	}
	for rep := 0; rep < o.reps; rep++ {
		for _, fl := range floors {
			if err := figs.measureFloor(fl, o, rep); err != nil {
				return err
			}
		}
	}
	idles := map[string]idleCost{}
	n := min(o.idleMax, 200)
	for i, p := range rt {
		g, k, err := idleRuntimeSessions(ctx, p.path, backends[[]string{"cri-streaming", "kubestream"}[i]], n)
		if err != nil {
			return fmt.Errorf("%s idle: %w", p.name, err)
		}
		idles[p.name] = idleCost{g, k}
	}
	report := runtimeReport(o, rt, chain, figs, idles)
	fmt.Print(report)
	out := o.out
	if out == "bench/results.md" {
		out = "bench/results-runtime.md"
	}
	return os.WriteFile(out, []byte(report), 0o644)
}

// runtimePath is a path measured by orchestrateRuntime, with the node's
// processes on it, whose CPU is the path's.
type runtimePath struct {
	*path
	procs []*child // the node's processes on this path
}

// runtimeFloor is a floor measured by orchestrateRuntime: raw bytes from
// addr, with the processes that move them.
type runtimeFloor struct {
	name, addr string
	procs      []*child
}

// idleCost is what one idle session costs the runtime's process.
type idleCost struct {
	goroutines, kib float64
}

// startRuntimeBackends starts a bench runtime behind cri-streaming's
// server and one behind kubestream's, each in its own directory under dir,
// and dials their CRI sockets; both by implementation.
func startRuntimeBackends(ctx context.Context, o options, dir string, st *started) (map[string]*child, map[string]*cri.Client, error) {
	backends := map[string]*child{}
	clients := map[string]*cri.Client{}
	for _, impl := range []string{"cri-streaming", "kubestream"} {
		d := filepath.Join(dir, impl)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, err
		}
		b, err := st.child("-role", "backend", "-impl", impl, "-dir", d, "-pf-size", itoa(o.pfSize))
		if err != nil {
			return nil, nil, err
		}
		c, err := cri.Dial(ctx, b.value, time.Minute)
		if err != nil {
			return nil, nil, err
		}
		st.onStop(func() { c.Close() })
		backends[impl], clients[impl] = b, c
	}
	return backends, clients, nil
}

// startChain starts the node's translators in front of the runtimes: the
// chain's paths.
func startChain(dir string, backends map[string]*child, clients map[string]*cri.Client, st *started) ([]runtimePath, error) {
	var chain []runtimePath
	for _, c := range []struct{ name, impl, backend string }{
		{"upstream translator + cri-streaming", "upstream", "cri-streaming"},
		{"kubestream translating + cri-streaming", "kubestream", "cri-streaming"},
		{"kubestream direct + kubestream runtime", "kubestream-direct", "kubestream"},
	} {
		tr, err := st.child("-role", "translator", "-impl", c.impl, "-cri", backends[c.backend].value, "-dir", dir)
		if err != nil {
			return nil, err
		}
		chain = append(chain, runtimePath{&path{name: c.name, base: tr.value, cri: clients[c.backend], proc: tr}, []*child{tr, backends[c.backend]}})
	}
	return chain, nil
}

// startFloors starts the relay of the floors and returns them.
func startFloors(dir string, backends map[string]*child, st *started) ([]runtimeFloor, error) {
	// The floor: raw bytes from the kubestream backend's process; and the
	// same through a byte-copying relay, the cost of a hop that only copies.
	rawAddr, err := os.ReadFile(filepath.Join(dir, "kubestream", "http.addr"))
	if err != nil {
		return nil, err
	}
	rl, err := st.child("-role", "relay", "-target", string(rawAddr))
	if err != nil {
		return nil, err
	}
	return []runtimeFloor{
		{rawRuntimeFloor, string(rawAddr), []*child{backends["kubestream"]}},
		{rawChainFloor, rl.value, []*child{rl, backends["kubestream"]}},
	}, nil
}

// idleRuntimeSessions opens n sessions straight at the runtime, each an
// echo waiting for stdin, and returns what one costs the runtime's process
// in goroutines and resident KiB once they settled.
func idleRuntimeSessions(ctx context.Context, p *path, proc *child, n int) (float64, float64, error) {
	u, err := p.cri.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: benchContainer, Cmd: []string{"emit", "0"}, Stdout: true})
	if err != nil {
		return 0, 0, err
	}
	statsURL := "http://" + u.Host + "/debug/bench-stats"
	stats := func() (int, int64) {
		resp, err := http.Get(statsURL)
		if err != nil {
			return 0, 0
		}
		defer resp.Body.Close()
		var st procStats
		_ = json.NewDecoder(resp.Body).Decode(&st)
		return st.Goroutines, proc.rssKB()
	}
	settle := func() (int, int64) {
		g, k := stats()
		for range 20 {
			time.Sleep(300 * time.Millisecond)
			g2, k2 := stats()
			if g2 == g {
				return g2, k2
			}
			g, k = g2, k2
		}
		return g, k
	}
	g0, k0 := settle()
	var writers []*io.PipeWriter
	done := make(chan error, n)
	for range n {
		ex, err := p.executor(ctx, []string{"echo"}, true)
		if err != nil {
			return 0, 0, err
		}
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		go func() { done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: pr, Stdout: io.Discard}) }()
	}
	g1, k1 := settle()
	for _, w := range writers {
		w.Close()
	}
	for range n {
		if err := <-done; err != nil {
			return 0, 0, err
		}
	}
	return float64(g1-g0) / float64(n), float64(k1-k0) / float64(n), nil
}
