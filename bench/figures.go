// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// measureRep takes one repetition of every figure selected by -only.
func measureRep(ctx context.Context, p *path, o options, r *results, dir string) error {
	if o.want("stdout") {
		if err := r.measureStdout(ctx, p, o); err != nil {
			return err
		}
	}
	if o.want("audit") && (p.name == "kubestream" || p.name == "kubestream-audit") {
		if err := r.measureTTY(ctx, p, o, dir); err != nil {
			return err
		}
	}
	if o.want("stdin") {
		if err := r.measureStdin(ctx, p, o); err != nil {
			return err
		}
	}
	if o.want("echo") {
		lat, err := p.echo(ctx, o.echoN)
		if err != nil {
			return fmt.Errorf("%s echo: %w", p.name, err)
		}
		r.echoP50[p.name] = append(r.echoP50[p.name], float64(percentile(lat, 0.5).Microseconds()))
		r.echoP99[p.name] = append(r.echoP99[p.name], float64(percentile(lat, 0.99).Microseconds()))
	}
	if o.want("setup") {
		setups, err := setupTimes(ctx, p, o.setupN)
		if err != nil {
			return fmt.Errorf("%s setup: %w", p.name, err)
		}
		r.setupP50[p.name] = append(r.setupP50[p.name], ms(percentile(setups, 0.5)))
		r.setupP99[p.name] = append(r.setupP99[p.name], ms(percentile(setups, 0.99)))
	}
	if o.want("pf") {
		return r.measurePortForward(ctx, p, o)
	}
	return nil
}

// figures is where one kind of transfer's figures go: its throughput,
// and the CPU per GiB of the path's process and of the client (this
// process), each a list per path.
type figures struct{ mbps, cpu, client map[string][]float64 }

// take runs one transfer of size bytes and records its figures in t.
func (r *results) take(p *path, t figures, size int64, run func() (time.Duration, error)) error {
	cpu0, self0 := p.proc.cpu(), procCPU(os.Getpid())
	d, err := run()
	if err != nil {
		return err
	}
	cpu1, self1 := p.proc.cpu(), procCPU(os.Getpid())
	t.mbps[p.name] = append(t.mbps[p.name], mbps(size, d))
	t.cpu[p.name] = append(t.cpu[p.name], perGiB(cpu1-cpu0, size))
	t.client[p.name] = append(t.client[p.name], perGiB(self1-self0, size))
	return nil
}

// measureStdout takes one stdout transfer.
func (r *results) measureStdout(ctx context.Context, p *path, o options) error {
	if err := r.take(p, figures{r.stdoutMBps, r.cpuStdout, r.clientStdout}, o.size,
		func() (time.Duration, error) { return p.stdout(ctx, o.size) }); err != nil {
		return fmt.Errorf("%s stdout: %w", p.name, err)
	}
	return nil
}

// measureStdin takes one stdin transfer.
func (r *results) measureStdin(ctx context.Context, p *path, o options) error {
	if err := r.take(p, figures{r.stdinMBps, r.cpuStdin, r.clientStdin}, o.size,
		func() (time.Duration, error) { return p.stdin(ctx, o.size) }); err != nil {
		return fmt.Errorf("%s stdin: %w", p.name, err)
	}
	return nil
}

// measurePortForward takes one port-forward transfer each way.
func (r *results) measurePortForward(ctx context.Context, p *path, o options) error {
	if err := r.take(p, figures{r.pfDownMBps, r.cpuPfDown, r.clientPfDown}, o.pfSize,
		func() (time.Duration, error) { return p.portForward(ctx, o.pfSize, true) }); err != nil {
		return fmt.Errorf("%s port-forward down: %w", p.name, err)
	}
	if err := r.take(p, figures{r.pfUpMBps, r.cpuPfUp, r.clientPfUp}, o.pfSize,
		func() (time.Duration, error) { return p.portForward(ctx, o.pfSize, false) }); err != nil {
		return fmt.Errorf("%s port-forward up: %w", p.name, err)
	}
	return nil
}

func setupTimes(ctx context.Context, p *path, n int) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; i < n+5; i++ {
		d, err := p.setup(ctx)
		if err != nil {
			return nil, err
		}
		if i >= 5 {
			out = append(out, d)
		}
	}
	return out, nil
}

// measureConcurrency takes the aggregate stdout throughput of every path
// but kubestream-audit at each -concurrency level.
func measureConcurrency(ctx context.Context, paths []*path, o options, r *results) error {
	if !o.want("concurrency") {
		return nil
	}
	for _, n := range strings.Split(o.concurrency, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || k < 1 {
			return fmt.Errorf("bad -concurrency %q", o.concurrency)
		}
		r.concurrencyLevels = append(r.concurrencyLevels, k)
		for _, p := range paths {
			if p.name == "kubestream-audit" {
				continue
			}
			agg, err := concurrentStdout(ctx, p, k, o.size)
			if err != nil {
				return fmt.Errorf("%s concurrency %d: %w", p.name, k, err)
			}
			if r.concurrency[p.name] == nil {
				r.concurrency[p.name] = map[int]float64{}
			}
			r.concurrency[p.name][k] = agg
			logf("concurrency %2d %-10s %6.0f MB/s aggregate", k, p.name, agg)
		}
	}
	return nil
}

// concurrentStdout runs k transfers of size/k at once; aggregate MB/s.
func concurrentStdout(ctx context.Context, p *path, k int, size int64) (float64, error) {
	each := size / int64(k)
	var wg sync.WaitGroup
	errs := make(chan error, k)
	start := time.Now()
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.stdout(ctx, each)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return mbps(each*int64(k), time.Since(start)), nil
}

// measureIdle takes the translators' setup latency unloaded, then what
// idle sessions cost them (idleScaling).
func measureIdle(ctx context.Context, paths []*path, o options, r *results) error {
	// Unloaded baselines first: right after thousands of sessions
	// close, backend and translator are still tearing them down.
	translators := paths[2:4] // upstream and kubestream
	for _, p := range translators {
		unloaded, err := setupTimes(ctx, p, o.setupN)
		if err != nil {
			return fmt.Errorf("%s setup: %w", p.name, err)
		}
		r.idleSetupP99[p.name] = ms(percentile(unloaded, 0.99))
	}
	for _, p := range translators {
		if err := idleScaling(ctx, p, o, r, logf); err != nil {
			return fmt.Errorf("%s idle sessions: %w", p.name, err)
		}
	}
	return nil
}

// idleScaling opens idle sessions up to o.idleMax, recording the
// translator's goroutines, RSS and heap per session at each decade, and
// setup latency with all of them held against an unloaded server.
func idleScaling(ctx context.Context, p *path, o options, r *results, logf func(string, ...any)) error {
	base, baseRSS, err := p.stats()
	if err != nil {
		return err
	}
	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	levels := []int{}
	for l := 1; l < o.idleMax; l *= 10 {
		levels = append(levels, l)
	}
	for _, level := range append(levels, o.idleMax) {
		for len(conns) < level {
			c, err := p.idleSession()
			if err != nil {
				return fmt.Errorf("opening idle session %d: %w", len(conns)+1, err)
			}
			conns = append(conns, c)
		}
		time.Sleep(200 * time.Millisecond)
		st, rss, err := p.stats()
		if err != nil {
			return err
		}
		pt := idlePoint{sessions: level, goroutines: st.Goroutines, rssKB: rss, heapKB: int64(st.HeapInuse / 1024),
			perGoroutines: float64(st.Goroutines-base.Goroutines) / float64(level),
			perRSSKB:      float64(rss-baseRSS) / float64(level),
			perHeapKB:     float64(int64(st.HeapInuse)-int64(base.HeapInuse)) / 1024 / float64(level)}
		r.idle[p.name] = append(r.idle[p.name], pt)
		logf("idle %-10s %6d sessions: %6.1f goroutines, %7.1f KiB RSS, %7.1f KiB heap per session",
			p.name, level, pt.perGoroutines, pt.perRSSKB, pt.perHeapKB)
	}
	loaded, err := setupTimes(ctx, p, o.setupN)
	if err != nil {
		return err
	}
	r.loadedSetupP99[p.name] = ms(percentile(loaded, 0.99))
	defer time.Sleep(5 * time.Second) // let the teardown of the sessions settle
	logf("setup p99 %-10s unloaded %.2fms, with %d idle sessions %.2fms", p.name, r.idleSetupP99[p.name], len(conns), r.loadedSetupP99[p.name])
	return nil
}
