// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"time"
)

// udpSizes are the datagrams measured: one that fits an Ethernet MTU with
// room for headers, and one that a fragmenting sender would use.
var udpSizes = []int{1400, 32 << 10}

// modeFigs holds the reverse group's figures by path ("forward",
// "reverse"), one per repetition.
type modeFigs struct {
	seq, par, cpuConn        map[string][]float64 // conn/s; node CPU µs per connection
	down, up, cpuDown, cpuUp map[string][]float64 // MB/s; node CPU s/GiB
	udpRate, udpMBps         map[int][]float64    // by datagram size
	udpSent, udpLost         map[int]int
	connN, reps              int
	streamSize               int64
	started                  time.Time
}

func newModeFigs(o options) *modeFigs {
	m := func() map[string][]float64 { return map[string][]float64{} }
	return &modeFigs{seq: m(), par: m(), cpuConn: m(), down: m(), up: m(), cpuDown: m(), cpuUp: m(),
		udpRate: map[int][]float64{}, udpMBps: map[int][]float64{}, udpSent: map[int]int{}, udpLost: map[int]int{},
		connN: o.connN, reps: o.reps, streamSize: reverseSize(o.size), started: time.Now()}
}

// reverseSize is one transfer: -size, capped as the tty transfer is, so a
// run at the default size stays within minutes on a loaded machine.
func reverseSize(size int64) int64 { return min(size, 256<<20) }

// measure takes one repetition of the TCP figures over e, node being the
// serve process whose CPU is counted.
func (f *modeFigs) measure(name string, e endpoints, node *child) error {
	cpu0 := node.cpu()
	seq, err := connRate(e.echo, f.connN, 1)
	if err != nil {
		return fmt.Errorf("connections one at a time: %w", err)
	}
	par, err := connRate(e.echo, f.connN, concurrentConns)
	if err != nil {
		return fmt.Errorf("connections %d at once: %w", concurrentConns, err)
	}
	cpu1 := node.cpu()
	f.seq[name], f.par[name] = append(f.seq[name], seq), append(f.par[name], par)
	f.cpuConn[name] = append(f.cpuConn[name], float64((cpu1-cpu0).Microseconds())/float64(2*f.connN))
	perGiB := func(d time.Duration) float64 { return d.Seconds() * (1 << 30) / float64(f.streamSize) }
	d, err := transfer(e.down, f.streamSize)
	if err != nil {
		return fmt.Errorf("pod → client: %w", err)
	}
	cpu2 := node.cpu()
	f.down[name], f.cpuDown[name] = append(f.down[name], mbps(f.streamSize, d)), append(f.cpuDown[name], perGiB(cpu2-cpu1))
	if d, err = transfer(e.up, f.streamSize); err != nil {
		return fmt.Errorf("client → pod: %w", err)
	}
	f.up[name], f.cpuUp[name] = append(f.up[name], mbps(f.streamSize, d)), append(f.cpuUp[name], perGiB(node.cpu()-cpu2))
	return nil
}

// measureUDP takes every repetition of the UDP figures through the
// session listening at local, each from a new local peer.
func (f *modeFigs) measureUDP(local *net.UDPAddr) error {
	for rep := 1; rep <= f.reps; rep++ {
		for _, size := range udpSizes {
			n := max(2000, int(min(f.streamSize, 64<<20)/int64(size)))
			r, err := udpRate(local, size, n)
			if err != nil {
				return fmt.Errorf("%d-byte datagrams: %w", size, err)
			}
			f.udpRate[size] = append(f.udpRate[size], r.perSec)
			f.udpMBps[size] = append(f.udpMBps[size], r.mbps)
			f.udpSent[size] += r.sent
			f.udpLost[size] += r.lost
			fmt.Fprintf(os.Stderr, "rep %d udp %5d B %8.0f datagrams/s %6.0f MB/s, %d of %d lost\n",
				rep, size, r.perSec, r.mbps, r.lost, r.sent)
		}
	}
	return nil
}

// write prints the tables and writes them to o.out (by default
// bench/results-reverse.md).
func (f *modeFigs) write(o options) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Reverse and UDP port-forward beside forward (`-only reverse`)\n\n")
	fmt.Fprintf(&b, "Run %s on %d CPUs (%s/%s, %s); medians of %d alternated repetitions. "+
		"The node is `kubestream serve` on the embedded reference runtime in its own process (a pod's network is this host's loopback); "+
		"client ends, services and the pod's openers are in the bench process. "+
		"Forward: client-go's PortForwarder (kubectl port-forward's code) over its WebSocket tunnel dialer, one session. "+
		"Reverse: kubectl-kubestream's client, one session. Short connections: open, a %d-byte request and its echo, close, %d per figure. "+
		"Transfers: one connection carrying %d MiB. Node CPU is the serve process's: forward's includes the reference runtime's streaming server, "+
		"which forward goes through and reverse does not.\n\n",
		f.started.UTC().Format(time.RFC3339), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), f.reps,
		echoRequest, f.connN, f.streamSize>>20)
	b.WriteString("| figure | forward port-forward | reverse port-forward | reverse ÷ forward |\n|---|---|---|---|\n")
	for _, r := range []struct {
		name, unit string
		m          map[string][]float64
	}{
		{"connections per second, one at a time", "conn/s", f.seq},
		{fmt.Sprintf("connections per second, %d at once", concurrentConns), "conn/s", f.par},
		{"node CPU per connection", "µs", f.cpuConn},
		{"throughput pod → client", "MB/s", f.down},
		{"throughput client → pod", "MB/s", f.up},
		{"node CPU per GiB pod → client", "s", f.cpuDown},
		{"node CPU per GiB client → pod", "s", f.cpuUp},
	} {
		fw, rv := median(r.m["forward"]), median(r.m["reverse"])
		fmt.Fprintf(&b, "| %s | %.*f %s | %.*f %s | %s |\n", r.name, prec(r.unit), fw, r.unit, prec(r.unit), rv, r.unit, ratio(rv, fw))
	}
	b.WriteString("\n## UDP port-forward, one session\n\n")
	b.WriteString("No forward figure to compare with: Kubernetes' port-forward carries TCP only, so these are absolute. " +
		"A local peer sends datagrams through the session to an echo in the pod, a bounded number in flight; " +
		"datagrams per second are those that came back (each crossed the session both ways), MB/s their payload one way.\n\n")
	b.WriteString("| datagram | datagrams per second | MB/s one way | lost (all repetitions) |\n|---|---|---|---|\n")
	for _, size := range udpSizes {
		fmt.Fprintf(&b, "| %d B | %.0f | %.1f | %d of %d |\n", size, median(f.udpRate[size]), median(f.udpMBps[size]), f.udpLost[size], f.udpSent[size])
	}
	fmt.Print(b.String())
	out := o.out
	if out == "bench/results.md" {
		out = "bench/results-reverse.md"
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}
