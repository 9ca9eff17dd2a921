// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// procsCPU is the processes' CPU time so far, together.
func procsCPU(ps []*child) time.Duration {
	var t time.Duration
	for _, p := range ps {
		t += p.cpu()
	}
	return t
}

// runtimeFig is one path's figures, one per repetition: MB/s, and the
// node's CPU-s/GiB.
type runtimeFig struct{ out, in, outCPU, inCPU, pfDown, pfUp, pfDownCPU, pfUpCPU []float64 }

// runtimeFigs holds the figures by path (or floor) name.
type runtimeFigs map[string]*runtimeFig

// of is name's figures, new when there are none yet.
func (figs runtimeFigs) of(name string) *runtimeFig {
	f := figs[name]
	if f == nil {
		f = &runtimeFig{}
		figs[name] = f
	}
	return f
}

// measure takes one repetition of p's figures: stdout and stdin, and
// port-forward both ways on a runtime alone.
func (figs runtimeFigs) measure(ctx context.Context, p runtimePath, o options, rep int) error {
	f := figs.of(p.name)
	gib := float64(o.size) / (1 << 30)
	c0 := procsCPU(p.procs)
	d, err := p.stdout(ctx, o.size)
	if err != nil {
		return fmt.Errorf("%s stdout: %w", p.name, err)
	}
	c1 := procsCPU(p.procs)
	f.out = append(f.out, mbps(o.size, d))
	f.outCPU = append(f.outCPU, (c1-c0).Seconds()/gib)
	d, err = p.stdin(ctx, o.size)
	if err != nil {
		return fmt.Errorf("%s stdin: %w", p.name, err)
	}
	f.in = append(f.in, mbps(o.size, d))
	f.inCPU = append(f.inCPU, (procsCPU(p.procs)-c1).Seconds()/gib)
	if p.cri != nil && p.base == "" { // the runtime alone: port-forward too
		for _, down := range []bool{true, false} {
			c0 := procsCPU(p.procs)
			d, err := p.portForward(ctx, o.pfSize, down)
			if err != nil {
				return fmt.Errorf("%s port-forward: %w", p.name, err)
			}
			c := (procsCPU(p.procs) - c0).Seconds() / (float64(o.pfSize) / (1 << 30))
			if down {
				f.pfDown, f.pfDownCPU = append(f.pfDown, mbps(o.pfSize, d)), append(f.pfDownCPU, c)
			} else {
				f.pfUp, f.pfUpCPU = append(f.pfUp, mbps(o.pfSize, d)), append(f.pfUpCPU, c)
			}
		}
	}
	f.log(rep, p.name)
	return nil
}

// measureFloor takes one repetition of a floor's figures, stdout and
// stdin.
func (figs runtimeFigs) measureFloor(fl runtimeFloor, o options, rep int) error {
	f := figs.of(fl.name)
	gib := float64(o.size) / (1 << 30)
	c0 := procsCPU(fl.procs)
	d, err := rawClient(fl.addr, "stdout", o.size)
	if err != nil {
		return fmt.Errorf("%s: %w", fl.name, err)
	}
	c1 := procsCPU(fl.procs)
	f.out, f.outCPU = append(f.out, mbps(o.size, d)), append(f.outCPU, (c1-c0).Seconds()/gib)
	if d, err = rawClient(fl.addr, "stdin", o.size); err != nil {
		return fmt.Errorf("%s: %w", fl.name, err)
	}
	f.in, f.inCPU = append(f.in, mbps(o.size, d)), append(f.inCPU, (procsCPU(fl.procs)-c1).Seconds()/gib)
	f.log(rep, fl.name)
	return nil
}

// log logs the repetition's figures (rep counts from 0).
func (f *runtimeFig) log(rep int, name string) {
	fmt.Fprintf(os.Stderr, "rep %d %-42s stdout %7.0f MB/s %5.2f CPU-s/GiB  stdin %7.0f MB/s %5.2f CPU-s/GiB\n",
		rep+1, name, last(f.out), last(f.outCPU), last(f.in), last(f.inCPU))
}

// runtimeReport is orchestrateRuntime's Markdown: the runtime's streaming
// server, then the node as a whole.
func runtimeReport(o options, rt, chain []runtimePath, figs runtimeFigs, idles map[string]idleCost) string {
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
	writeChainReport(&b, chain, figs)
	return b.String()
}

// writeChainReport writes the node's table: client-go's v5 executor
// through the node to the runtime.
func writeChainReport(b *strings.Builder, chain []runtimePath, figs runtimeFigs) {
	b.WriteString("## The node as a whole: client-go's v5 executor through the node to the runtime\n\n")
	b.WriteString("| path | stdout MB/s | stdin MB/s | node CPU-s/GiB stdout (translator + runtime) | stdin |\n|---|---|---|---|---|\n")
	for _, p := range chain {
		f := figs[p.name]
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.2f | %.2f |\n", p.name, median(f.out), median(f.in), median(f.outCPU), median(f.inCPU))
	}
	cf := figs[rawChainFloor]
	fmt.Fprintf(b, "| %s | %.0f | %.0f | %.2f | %.2f |\n", rawChainFloor, median(cf.out), median(cf.in), median(cf.outCPU), median(cf.inCPU))
	up, tr, di := figs[chain[0].name], figs[chain[1].name], figs[chain[2].name]
	fmt.Fprintf(b, "\nDirect chain ÷ kubestream translating, node CPU per GiB: stdout %s, stdin %s (target ≤ 0.5); ÷ upstream's path: stdout %s, stdin %s (target ≤ 0.25). Throughput ÷ translating: stdout %s, stdin %s.\n",
		ratio(median(di.outCPU), median(tr.outCPU)), ratio(median(di.inCPU), median(tr.inCPU)),
		ratio(median(di.outCPU), median(up.outCPU)), ratio(median(di.inCPU), median(up.inCPU)),
		ratio(median(di.out), median(tr.out)), ratio(median(di.in), median(tr.in)))
	fmt.Fprintf(b, "\nThe direct chain ÷ raw bytes through a byte-copying relay (the runtime's floor plus a hop that only copies, 32 KiB at a time), node CPU per GiB: stdout %s, stdin %s.\n",
		ratio(median(di.outCPU), median(cf.outCPU)), ratio(median(di.inCPU), median(cf.inCPU)))
}
