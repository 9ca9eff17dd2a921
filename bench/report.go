// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

type row struct {
	name                  string
	unit                  string
	direct, relay, up, ks float64
	hasDirect             bool // direct SPDY (and the relay) have this figure
	target                string
	met                   *bool
}

func b(v bool) *bool { return &v }

func (r *results) rows() []row {
	// fig reads one figure's medians for every path; perTranslator figures
	// (CPU of the middle process) have no direct column, but the relay's
	// own cost is the floor they are read against.
	fig := func(name, unit string, x map[string][]float64, hasDirect bool, target string) row {
		m := func(p string) float64 { return median(x[p]) }
		return row{name: name, unit: unit, direct: m("direct"), relay: m("relay"), up: m("upstream"), ks: m("kubestream"), hasDirect: hasDirect, target: target}
	}
	rows := []row{
		fig("stdout throughput", "MB/s", r.stdoutMBps, true, "≥ 0.9× direct"),
		fig("stdin throughput", "MB/s", r.stdinMBps, true, "≥ 0.9× direct"),
		fig("echo round trip p50", "µs", r.echoP50, true, "≤ 1.1× direct"),
		fig("echo round trip p99", "µs", r.echoP99, true, ""),
		fig("setup to first byte p50", "ms", r.setupP50, true, "≤ 1.1× direct"),
		fig("setup to first byte p99", "ms", r.setupP99, true, ""),
		fig("port-forward down", "MB/s", r.pfDownMBps, true, "≥ 0.95× direct"),
		fig("port-forward up", "MB/s", r.pfUpMBps, true, "≥ 0.95× direct"),
	}
	if !r.inproc {
		rows = append(rows,
			fig("translator (relay) CPU per GiB stdout", "s", r.cpuStdout, false, "≤ 1/3 upstream"),
			fig("translator (relay) CPU per GiB stdin", "s", r.cpuStdin, false, "≤ 1/3 upstream"),
			fig("translator (relay) CPU per GiB port-forward down", "s", r.cpuPfDown, false, ""),
			fig("translator (relay) CPU per GiB port-forward up", "s", r.cpuPfUp, false, ""),
			fig("client (client-go) CPU per GiB stdout", "s", r.clientStdout, true, ""),
			fig("client (client-go) CPU per GiB stdin", "s", r.clientStdin, true, ""),
			fig("client (client-go) CPU per GiB port-forward down", "s", r.clientPfDown, true, ""),
			fig("client (client-go) CPU per GiB port-forward up", "s", r.clientPfUp, true, ""),
		)
		if up, ks := lastIdle(r.idle["upstream"]), lastIdle(r.idle["kubestream"]); up != nil && ks != nil {
			rows = append(rows,
				row{name: fmt.Sprintf("goroutines per idle session (%d held)", ks.sessions), unit: "", up: up.perGoroutines, ks: ks.perGoroutines, target: "≤ 6", met: b(ks.perGoroutines <= 6)},
				row{name: fmt.Sprintf("RSS per idle session (%d held)", ks.sessions), unit: "KiB", up: up.perRSSKB, ks: ks.perRSSKB, target: "≤ 128 KiB", met: b(ks.perRSSKB <= 128)},
				row{name: fmt.Sprintf("heap per idle session (%d held)", ks.sessions), unit: "KiB", up: up.perHeapKB, ks: ks.perHeapKB},
				row{name: fmt.Sprintf("setup p99 with %d idle sessions ÷ unloaded", ks.sessions), unit: "×",
					up: r.loadedSetupP99["upstream"] / r.idleSetupP99["upstream"], ks: r.loadedSetupP99["kubestream"] / r.idleSetupP99["kubestream"],
					target: "≤ 2×", met: b(r.loadedSetupP99["kubestream"] <= 2*r.idleSetupP99["kubestream"])},
			)
		}
	}
	for i := range rows {
		rw := &rows[i]
		if rw.met != nil || rw.target == "" || rw.ks == 0 {
			continue // decided already, no target, or not measured (-only)
		}
		switch {
		case strings.HasPrefix(rw.target, "≥ 0.9×"):
			rw.met = b(rw.ks >= 0.9*rw.direct)
		case strings.HasPrefix(rw.target, "≥ 0.95×"):
			rw.met = b(rw.ks >= 0.95*rw.direct)
		case strings.HasPrefix(rw.target, "≤ 1.1×"):
			rw.met = b(rw.ks <= 1.1*rw.direct)
		case strings.HasPrefix(rw.target, "≤ 1/3"):
			rw.met = b(rw.ks <= rw.up/3)
		}
	}
	return rows
}

// prec is the decimals a unit is shown with: CPU seconds per GiB need two
// for the ratios beside them to be checkable by eye.
func prec(unit string) int {
	if unit == "s" {
		return 2
	}
	return 1
}

func lastIdle(p []idlePoint) *idlePoint {
	if len(p) == 0 {
		return nil
	}
	return &p[len(p)-1]
}

func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// write writes the results to o.out (and stdout) in Markdown, and their
// chart to o.svg.
func (r *results) write(o options) error {
	var s strings.Builder
	r.writeFigures(&s)
	if len(r.stdoutMBps["kubestream-audit"])+len(r.ttyMBps["kubestream-audit"]) > 0 {
		r.writeAudit(&s)
	}
	r.writeConcurrency(&s)
	if len(r.idle) > 0 {
		r.writeIdle(&s)
	}
	fmt.Fprintf(&s, "\n![ratios](%s)\n", strings.TrimPrefix(o.svg, "bench/"))
	if err := os.WriteFile(o.out, []byte(s.String()), 0o644); err != nil {
		return err
	}
	fmt.Print(s.String())
	return os.WriteFile(o.svg, []byte(r.svg()), 0o644)
}

// writeFigures writes the run's heading and the table of every path's
// figures.
func (r *results) writeFigures(s *strings.Builder) {
	mode := "three processes (client, translator, backend apart)"
	if r.inproc {
		mode = "one process"
	}
	fmt.Fprintf(s, "# kubestream benchmark results\n\n")
	fmt.Fprintf(s, "Run %s on %d CPUs (%s/%s, %s), %s; medians of %d alternated repetitions; transfers of %d MiB (port-forward %d MiB); echo over %d round trips; setup over %d sessions. Written by `make bench` (`go run ./bench`).\n\n",
		r.started.UTC().Format(time.RFC3339), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), mode,
		r.reps, r.size>>20, r.pfSize>>20, r.echoN, r.setupN)
	fmt.Fprintf(s, "Raw loopback TCP, one connection between two goroutines: %.0f MB/s, the physical ceiling here.\n\n", median(r.loopback))
	fmt.Fprintf(s, "The relay column is direct SPDY through a process that copies bytes and does nothing else (bench/relay.go): what any translator in its own process pays at least, so relay ÷ direct is the ceiling for a translator here.\n\n")
	fmt.Fprintf(s, "| figure | direct SPDY | TCP relay | upstream translator | kubestream | relay ÷ direct | kubestream ÷ direct | kubestream ÷ upstream | target | met |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, rw := range r.rows() {
		d, rl, rd, kd := "—", "—", "—", "—"
		if rw.hasDirect {
			d, kd = fmt.Sprintf("%.*f %s", prec(rw.unit), rw.direct, rw.unit), ratio(rw.ks, rw.direct)
			rd = ratio(rw.relay, rw.direct)
		}
		if rw.relay != 0 {
			rl = fmt.Sprintf("%.*f %s", prec(rw.unit), rw.relay, rw.unit)
		}
		met := ""
		if rw.met != nil {
			met = yesNo(*rw.met)
		}
		fmt.Fprintf(s, "| %s | %s | %s | %.*f %s | %.*f %s | %s | %s | %s | %s | %s |\n", rw.name, d, rl, prec(rw.unit), rw.up, rw.unit, prec(rw.unit), rw.ks, rw.unit, rd, kd, ratio(rw.ks, rw.up), rw.target, met)
	}
}

// writeConcurrency writes the table of aggregate stdout throughput by
// number of concurrent transfers.
func (r *results) writeConcurrency(s *strings.Builder) {
	fmt.Fprintf(s, "\n## Aggregate stdout throughput with concurrent transfers (MB/s, %d MiB in all)\n\n| transfers | direct SPDY | TCP relay | upstream | kubestream | kubestream ÷ direct |\n|---|---|---|---|---|---|\n", r.size>>20)
	for _, k := range r.concurrencyLevels {
		fmt.Fprintf(s, "| %d | %.0f | %.0f | %.0f | %.0f | %s |\n", k, r.concurrency["direct"][k], r.concurrency["relay"][k], r.concurrency["upstream"][k], r.concurrency["kubestream"][k],
			ratio(r.concurrency["kubestream"][k], r.concurrency["direct"][k]))
	}
}

// writeIdle writes the table of what idle sessions cost the translators.
func (r *results) writeIdle(s *strings.Builder) {
	fmt.Fprintf(s, "\n## Idle sessions held by the translator process (per session, above its empty baseline)\n\n| sessions | upstream goroutines | upstream RSS KiB | upstream heap KiB | kubestream goroutines | kubestream RSS KiB | kubestream heap KiB |\n|---|---|---|---|---|---|---|\n")
	for i, up := range r.idle["upstream"] {
		if i >= len(r.idle["kubestream"]) {
			break
		}
		ks := r.idle["kubestream"][i]
		fmt.Fprintf(s, "| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", up.sessions, up.perGoroutines, up.perRSSKB, up.perHeapKB, ks.perGoroutines, ks.perRSSKB, ks.perHeapKB)
	}
	fmt.Fprintf(s, "\nSetup p99 unloaded vs with all sessions held: upstream %.2f → %.2f ms, kubestream %.2f → %.2f ms.\n",
		r.idleSetupP99["upstream"], r.loadedSetupP99["upstream"], r.idleSetupP99["kubestream"], r.loadedSetupP99["kubestream"])
}

// svg draws each figure's ratio to direct SPDY for both translators: bars
// right of 1.0 are better for throughput, left for latency.
func (r *results) svg() string {
	rows := r.rows()
	var bars []row
	for _, rw := range rows {
		if rw.hasDirect && rw.direct > 0 && !strings.HasPrefix(rw.name, "client") {
			bars = append(bars, rw)
		}
	}
	const left, width, barH, gap = 230, 420, 12, 14
	h := 60 + len(bars)*(3*barH+gap)
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`, left+width+120, h)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="20" font-size="14">Ratio to direct SPDY (1.0 = as fast as client-go straight to the runtime)</text>`)
	scale := func(v float64) float64 { return v / 2.0 * width } // 0..2×
	x1 := left + scale(1)
	fmt.Fprintf(&s, `<line x1="%.0f" y1="30" x2="%.0f" y2="%d" stroke="#888" stroke-dasharray="4"/>`, x1, x1, h-20)
	y := 40
	for _, rw := range bars {
		fmt.Fprintf(&s, `<text x="10" y="%d">%s</text>`, y+3*barH/2+4, rw.name)
		for i, v := range []float64{rw.relay / rw.direct, rw.up / rw.direct, rw.ks / rw.direct} {
			color := []string{"#a3a3a3", "#d08770", "#5e81ac"}[i]
			w := scale(v)
			if w > width {
				w = width
			}
			fmt.Fprintf(&s, `<rect x="%d" y="%d" width="%.0f" height="%d" fill="%s"/><text x="%.0f" y="%d">%.2f</text>`,
				left, y+i*barH, w, barH-2, color, float64(left)+w+4, y+i*barH+10, v)
		}
		y += 3*barH + gap
	}
	fmt.Fprintf(&s, `<rect x="%d" y="%d" width="10" height="10" fill="#a3a3a3"/><text x="%d" y="%d">TCP relay (ceiling)</text>`, left-160, h-15, left-146, h-6)
	fmt.Fprintf(&s, `<rect x="%d" y="%d" width="10" height="10" fill="#d08770"/><text x="%d" y="%d">upstream translator</text>`, left, h-15, left+14, h-6)
	fmt.Fprintf(&s, `<rect x="%d" y="%d" width="10" height="10" fill="#5e81ac"/><text x="%d" y="%d">kubestream</text>`, left+160, h-15, left+174, h-6)
	s.WriteString(`</svg>`)
	return s.String()
}

// yesNo is a table's "met" cell.
func yesNo(met bool) string {
	if met {
		return "yes"
	}
	return "**no**"
}
