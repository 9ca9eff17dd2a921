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
	"strings"
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
	var children []*child
	defer func() {
		for i := len(children) - 1; i >= 0; i-- {
			children[i].stop()
		}
	}()
	start := func(args ...string) (*child, error) {
		c, err := startChild(args...)
		if err == nil {
			children = append(children, c)
		}
		return c, err
	}
	backends := map[string]*child{}
	clients := map[string]*cri.Client{}
	for _, impl := range []string{"cri-streaming", "kubestream"} {
		d := filepath.Join(dir, impl)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		b, err := start("-role", "backend", "-impl", impl, "-dir", d, "-pf-size", itoa(o.pfSize))
		if err != nil {
			return err
		}
		c, err := cri.Dial(ctx, b.value, time.Minute)
		if err != nil {
			return err
		}
		defer c.Close()
		backends[impl], clients[impl] = b, c
	}
	type rpath struct {
		*path
		procs []*child // the node's processes on this path
	}
	rt := []rpath{
		{&path{name: "cri-streaming, SPDY", cri: clients["cri-streaming"]}, []*child{backends["cri-streaming"]}},
		{&path{name: "kubestream runtime, v5", cri: clients["kubestream"], v5: true}, []*child{backends["kubestream"]}},
	}
	var chain []rpath
	for _, c := range []struct{ name, impl, backend string }{
		{"upstream translator + cri-streaming", "upstream", "cri-streaming"},
		{"kubestream translating + cri-streaming", "kubestream", "cri-streaming"},
		{"kubestream direct + kubestream runtime", "kubestream-direct", "kubestream"},
	} {
		tr, err := start("-role", "translator", "-impl", c.impl, "-cri", backends[c.backend].value, "-dir", dir)
		if err != nil {
			return err
		}
		chain = append(chain, rpath{&path{name: c.name, base: tr.value, cri: clients[c.backend], proc: tr}, []*child{tr, backends[c.backend]}})
	}
	// The floor: raw bytes from the kubestream backend's process; and the
	// same through a byte-copying relay, the cost of a hop that only copies.
	rawAddr, err := os.ReadFile(filepath.Join(dir, "kubestream", "http.addr"))
	if err != nil {
		return err
	}
	rl, err := start("-role", "relay", "-target", string(rawAddr))
	if err != nil {
		return err
	}
	floors := []struct {
		name, addr string
		procs      []*child
	}{
		{rawRuntimeFloor, string(rawAddr), []*child{backends["kubestream"]}},
		{rawChainFloor, rl.value, []*child{rl, backends["kubestream"]}},
	}
	cpu := func(ps []*child) time.Duration {
		var t time.Duration
		for _, p := range ps {
			t += p.cpu()
		}
		return t
	}
	type fig struct{ out, in, outCPU, inCPU, pfDown, pfUp, pfDownCPU, pfUpCPU []float64 }
	figs := map[string]*fig{}
	gib := float64(o.size) / (1 << 30)
	for rep := 0; rep < o.reps; rep++ {
		for _, p := range append(append([]rpath{}, rt...), chain...) {
			f := figs[p.name]
			if f == nil {
				f = &fig{}
				figs[p.name] = f
			}
			c0 := cpu(p.procs)
			d, err := p.stdout(ctx, o.size)
			if err != nil {
				return fmt.Errorf("%s stdout: %w", p.name, err)
			}
			c1 := cpu(p.procs)
			f.out = append(f.out, mbps(o.size, d))
			f.outCPU = append(f.outCPU, (c1-c0).Seconds()/gib)
			d, err = p.stdin(ctx, o.size)
			if err != nil {
				return fmt.Errorf("%s stdin: %w", p.name, err)
			}
			f.in = append(f.in, mbps(o.size, d))
			f.inCPU = append(f.inCPU, (cpu(p.procs)-c1).Seconds()/gib)
			if p.cri != nil && p.base == "" { // the runtime alone: port-forward too
				for _, down := range []bool{true, false} {
					c0 := cpu(p.procs)
					d, err := p.portForward(ctx, o.pfSize, down)
					if err != nil {
						return fmt.Errorf("%s port-forward: %w", p.name, err)
					}
					c := (cpu(p.procs) - c0).Seconds() / (float64(o.pfSize) / (1 << 30))
					if down {
						f.pfDown, f.pfDownCPU = append(f.pfDown, mbps(o.pfSize, d)), append(f.pfDownCPU, c)
					} else {
						f.pfUp, f.pfUpCPU = append(f.pfUp, mbps(o.pfSize, d)), append(f.pfUpCPU, c)
					}
				}
			}
			fmt.Fprintf(os.Stderr, "rep %d %-42s stdout %7.0f MB/s %5.2f CPU-s/GiB  stdin %7.0f MB/s %5.2f CPU-s/GiB\n",
				rep+1, p.name, last(f.out), last(f.outCPU), last(f.in), last(f.inCPU))
		}
	}
	for rep := 0; rep < o.reps; rep++ {
		for _, fl := range floors {
			f := figs[fl.name]
			if f == nil {
				f = &fig{}
				figs[fl.name] = f
			}
			c0 := cpu(fl.procs)
			d, err := rawClient(fl.addr, "stdout", o.size)
			if err != nil {
				return fmt.Errorf("%s: %w", fl.name, err)
			}
			c1 := cpu(fl.procs)
			f.out, f.outCPU = append(f.out, mbps(o.size, d)), append(f.outCPU, (c1-c0).Seconds()/gib)
			if d, err = rawClient(fl.addr, "stdin", o.size); err != nil {
				return fmt.Errorf("%s: %w", fl.name, err)
			}
			f.in, f.inCPU = append(f.in, mbps(o.size, d)), append(f.inCPU, (cpu(fl.procs)-c1).Seconds()/gib)
			fmt.Fprintf(os.Stderr, "rep %d %-42s stdout %7.0f MB/s %5.2f CPU-s/GiB  stdin %7.0f MB/s %5.2f CPU-s/GiB\n",
				rep+1, fl.name, last(f.out), last(f.outCPU), last(f.in), last(f.inCPU))
		}
	}
	type idle struct {
		goroutines, kib float64
	}
	idles := map[string]idle{}
	n := min(o.idleMax, 200)
	for i, p := range rt {
		g, k, err := idleRuntimeSessions(ctx, p.path, backends[[]string{"cri-streaming", "kubestream"}[i]], n)
		if err != nil {
			return fmt.Errorf("%s idle: %w", p.name, err)
		}
		idles[p.name] = idle{g, k}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# The runtime side (`make bench BENCHFLAGS=\"-only runtime\"`)\n\n%s, %d repetitions of %d MiB each way, medians; each process its own.\n\n",
		time.Now().UTC().Format(time.RFC3339), o.reps, o.size>>20)
	b.WriteString("## The runtime's streaming server, client-go straight at its URL\n\n")
	b.WriteString("| path | stdout MB/s | stdin MB/s | runtime CPU-s/GiB stdout | stdin | goroutines per idle session | KiB per idle session |\n|---|---|---|---|---|---|---|\n")
	for _, p := range rt {
		f, id := figs[p.name], idles[p.name]
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2f | %.2f | %.1f | %.1f |\n", p.name, median(f.out), median(f.in), median(f.outCPU), median(f.inCPU), id.goroutines, id.kib)
	}
	fl := figs[rawRuntimeFloor]
	fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2f | %.2f | — | — |\n", rawRuntimeFloor, median(fl.out), median(fl.in), median(fl.outCPU), median(fl.inCPU))
	s, k := figs[rt[0].name], figs[rt[1].name]
	fmt.Fprintf(&b, "\nkubestream ÷ cri-streaming: stdout %s, stdin %s (target ≥ 1.2); CPU per GiB stdout %s, stdin %s (target ≤ 0.5); per idle session %.1f goroutines, %.1f KiB (targets ≤ 2, ≤ 64).\n\n",
		ratio(median(k.out), median(s.out)), ratio(median(k.in), median(s.in)), ratio(median(k.outCPU), median(s.outCPU)), ratio(median(k.inCPU), median(s.inCPU)),
		idles[rt[1].name].goroutines, idles[rt[1].name].kib)
	fmt.Fprintf(&b, "The floor ÷ cri-streaming, CPU per GiB: stdout %s, stdin %s: no server's process can cost less than the floor here, so a CPU ratio below that cannot be reached; kubestream's runtime above the floor: stdout %s, stdin %s CPU-s/GiB.\n\n",
		ratio(median(fl.outCPU), median(s.outCPU)), ratio(median(fl.inCPU), median(s.inCPU)),
		fmt.Sprintf("%.2f", median(k.outCPU)-median(fl.outCPU)), fmt.Sprintf("%.2f", median(k.inCPU)-median(fl.inCPU)))
	b.WriteString("Port-forward through the runtime's server, one connection (client-go's SPDY dialer at cri-streaming, its tunneling dialer at kubestream's):\n\n")
	b.WriteString("| path | down MB/s | up MB/s | runtime CPU-s/GiB down | up |\n|---|---|---|---|---|\n")
	for _, p := range rt {
		f := figs[p.name]
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2f | %.2f |\n", p.name, median(f.pfDown), median(f.pfUp), median(f.pfDownCPU), median(f.pfUpCPU))
	}
	b.WriteString("\n")
	b.WriteString("## The node as a whole: client-go's v5 executor through the node to the runtime\n\n")
	b.WriteString("| path | stdout MB/s | stdin MB/s | node CPU-s/GiB stdout (translator + runtime) | stdin |\n|---|---|---|---|---|\n")
	for _, p := range chain {
		f := figs[p.name]
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2f | %.2f |\n", p.name, median(f.out), median(f.in), median(f.outCPU), median(f.inCPU))
	}
	cf := figs[rawChainFloor]
	fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2f | %.2f |\n", rawChainFloor, median(cf.out), median(cf.in), median(cf.outCPU), median(cf.inCPU))
	up, tr, di := figs[chain[0].name], figs[chain[1].name], figs[chain[2].name]
	fmt.Fprintf(&b, "\nDirect chain ÷ kubestream translating, node CPU per GiB: stdout %s, stdin %s (target ≤ 0.5); ÷ upstream's path: stdout %s, stdin %s (target ≤ 0.25). Throughput ÷ translating: stdout %s, stdin %s.\n",
		ratio(median(di.outCPU), median(tr.outCPU)), ratio(median(di.inCPU), median(tr.inCPU)),
		ratio(median(di.outCPU), median(up.outCPU)), ratio(median(di.inCPU), median(up.inCPU)),
		ratio(median(di.out), median(tr.out)), ratio(median(di.in), median(tr.in)))
	fmt.Fprintf(&b, "\nThe direct chain ÷ raw bytes through a byte-copying relay (the runtime's floor plus a hop that only copies, 32 KiB at a time), node CPU per GiB: stdout %s, stdin %s.\n",
		ratio(median(di.outCPU), median(cf.outCPU)), ratio(median(di.inCPU), median(cf.inCPU)))
	fmt.Print(b.String())
	out := o.out
	if out == "bench/results.md" {
		out = "bench/results-runtime.md"
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
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
