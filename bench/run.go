// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubestream/kubestream/cri"
)

// results holds every figure by path name.
type results struct {
	stdoutMBps, stdinMBps        map[string][]float64
	ttyMBps                      map[string][]float64 // tty stdout (kubestream with and without a recording)
	recordingCut                 string               // why a recording stopped before the end of its session
	auditPairs                   []float64            // stdout throughput with an audit log ÷ without, one per back-to-back pair (paired)
	recorderPairs                []float64            // tty throughput recorded ÷ with a recording's writes beside and no recorder (paired)
	ttyPairs                     []float64            // tty stdout throughput recorded ÷ not, one per back-to-back pair
	diskPairs                    []float64            // tty stdout throughput with a recording's disk writes beside (diskBeside) ÷ without, per pair
	cpuTTY, sessionTTY           map[string][]float64 // tty stdout: translator CPU s/GiB; client, translator and backend together
	fileWrite                    []float64            // CPU s/GiB of copying a recording's bytes out and writing them to a file, no encoding (fileWriteCPU)
	backend                      *child               // three-process mode
	cpuStdout, cpuStdin          map[string][]float64 // translator (or relay) CPU s/GiB
	clientStdout, clientStdin    map[string][]float64 // client process CPU s/GiB
	cpuPfDown, cpuPfUp           map[string][]float64 // translator (or relay) CPU s/GiB
	clientPfDown, clientPfUp     map[string][]float64
	echoP50, echoP99             map[string][]float64 // µs
	setupP50, setupP99           map[string][]float64 // ms
	pfDownMBps, pfUpMBps         map[string][]float64
	idle                         map[string][]idlePoint
	loadedSetupP99, idleSetupP99 map[string]float64 // ms
	concurrency                  map[string]map[int]float64
	concurrencyLevels            []int
	size, pfSize                 int64
	reps, idleMax, echoN, setupN int
	started                      time.Time
	loopback                     []float64 // raw loopback TCP MB/s, one per repetition
	inproc                       bool
}

type idlePoint struct {
	sessions            int
	goroutines          int
	rssKB, heapKB       int64
	perGoroutines       float64
	perRSSKB, perHeapKB float64
}

func newResults(o options) *results {
	m := func() map[string][]float64 { return map[string][]float64{} }
	return &results{stdoutMBps: m(), ttyMBps: m(), cpuTTY: m(), sessionTTY: m(), stdinMBps: m(), cpuStdout: m(), cpuStdin: m(), clientStdout: m(), clientStdin: m(),
		cpuPfDown: m(), cpuPfUp: m(), clientPfDown: m(), clientPfUp: m(), echoP50: m(), echoP99: m(),
		setupP50: m(), setupP99: m(), pfDownMBps: m(), pfUpMBps: m(), idle: map[string][]idlePoint{},
		loadedSetupP99: map[string]float64{}, idleSetupP99: map[string]float64{},
		concurrency: map[string]map[int]float64{}, size: o.size, pfSize: o.pfSize, reps: o.reps,
		idleMax: o.idleMax, echoN: o.echoN, setupN: o.setupN, started: time.Now(), inproc: o.inproc}
}

// orchestrate is a run of every figure group -only selects (all of them
// by default, but runtime and reverse): it starts the paths, measures them
// and writes the results.
func orchestrate(o options) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "kubestream-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return err
		}
	}
	var st started
	defer st.stop()
	paths, err := startPaths(ctx, o, dir, &st)
	if err != nil {
		return err
	}
	r := newResults(o)
	if !o.inproc {
		r.backend = st.children[0]
	}
	if err := measureReps(ctx, paths, o, r, dir); err != nil {
		return err
	}
	if o.want("audit") {
		if err := measureAuditPairs(ctx, paths, o, r, dir); err != nil {
			return err
		}
	}
	if err := measureConcurrency(ctx, paths, o, r); err != nil {
		return err
	}
	if !o.inproc && o.want("idle") {
		if err := measureIdle(ctx, paths, o, r); err != nil {
			return err
		}
	}
	return r.write(o)
}

// startPaths starts the backend and, in front of it, the relay and the
// translators (in this process with -inproc, each in a child process
// otherwise), and returns the paths: direct, relay, then one per
// translator (upstream, kubestream, and kubestream-audit with -only audit).
func startPaths(ctx context.Context, o options, dir string, st *started) ([]*path, error) {
	endpoint, err := startBenchBackend(o, dir, st)
	if err != nil {
		return nil, err
	}
	c, err := cri.Dial(ctx, endpoint, time.Minute)
	if err != nil {
		return nil, err
	}
	st.onStop(func() { c.Close() })

	paths := []*path{{name: "direct", cri: c}}
	rp, err := startRelayPath(ctx, o, c, st)
	if err != nil {
		return nil, err
	}
	paths = append(paths, rp)
	impls := []string{"upstream", "kubestream"}
	if o.want("audit") {
		impls = append(impls, "kubestream-audit") // the cost of the audit log, same run
	}
	for _, impl := range impls {
		p, err := startTranslatorPath(impl, o, c, endpoint, dir, st)
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// startBenchBackend starts the bench runtime and returns its CRI endpoint.
func startBenchBackend(o options, dir string, st *started) (string, error) {
	if o.inproc {
		b, err := startBackend(dir, o.pfSize, "")
		if err != nil {
			return "", err
		}
		st.onStop(b.stop)
		return b.endpoint, nil
	}
	b, err := st.child("-role", "backend", "-dir", dir, "-pf-size", itoa(o.pfSize))
	if err != nil {
		return "", err
	}
	return b.value, nil
}

// startRelayPath starts the relay in front of the runtime's streaming
// server: direct SPDY through a process that only copies bytes.
func startRelayPath(ctx context.Context, o options, c *cri.Client, st *started) (*path, error) {
	// The relay forwards to the runtime's streaming server, whose address
	// is in any URL the runtime issues.
	u, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: benchContainer, Cmd: []string{"emit", "0"}, Stdout: true})
	if err != nil {
		return nil, err
	}
	rp := &path{name: "relay", cri: c}
	if o.inproc {
		rl, err := startRelay(u.Host)
		if err != nil {
			return nil, err
		}
		st.onStop(rl.stop)
		rp.relay = rl.addr()
	} else {
		ch, err := st.child("-role", "relay", "-target", u.Host)
		if err != nil {
			return nil, err
		}
		rp.relay, rp.proc = ch.value, ch
	}
	return rp, nil
}

// startTranslatorPath starts the translator impl in front of the runtime
// at endpoint (c).
func startTranslatorPath(impl string, o options, c *cri.Client, endpoint, dir string, st *started) (*path, error) {
	p := &path{name: impl, cri: c}
	if o.inproc {
		h, err := translatorHandler(impl, c, dir)
		if err != nil {
			return nil, err
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		srv := &http.Server{Handler: h}
		go func() { _ = srv.Serve(l) }()
		st.onStop(func() { srv.Close() })
		p.base = "http://" + l.Addr().String()
		return p, nil
	}
	args := []string{"-role", "translator", "-impl", impl, "-cri", endpoint, "-dir", dir}
	if o.profileDir != "" {
		args = append(args, "-profile-dir", o.profileDir)
	}
	ch, err := st.child(args...)
	if err != nil {
		return nil, err
	}
	p.base, p.proc = ch.value, ch
	return p, nil
}

// measureReps takes o.reps repetitions of every path's figures, the paths
// alternating within each, the raw loopback first.
func measureReps(ctx context.Context, paths []*path, o options, r *results, dir string) error {
	for rep := 1; rep <= o.reps; rep++ {
		lo, err := loopbackMBps(o.size)
		if err != nil {
			return fmt.Errorf("raw loopback: %w", err)
		}
		r.loopback = append(r.loopback, lo)
		logf("rep %d raw loopback TCP %6.0f MB/s", rep, lo)
		for _, p := range paths {
			if err := measureRep(ctx, p, o, r, dir); err != nil {
				return err
			}
			logf("rep %d %-10s stdout %6.0f MB/s stdin %6.0f MB/s echo p50 %4.0fµs setup p50 %5.2fms pf %5.0f/%5.0f MB/s",
				rep, p.name, last(r.stdoutMBps[p.name]), last(r.stdinMBps[p.name]), last(r.echoP50[p.name]),
				last(r.setupP50[p.name]), last(r.pfDownMBps[p.name]), last(r.pfUpMBps[p.name]))
		}
	}
	return nil
}

// logf logs a line of progress to stderr.
func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

// pathNamed is the path of that name.
func pathNamed(paths []*path, name string) *path {
	for _, p := range paths {
		if p.name == name {
			return p
		}
	}
	return nil
}
