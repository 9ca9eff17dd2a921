// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubestream/kubestream/audit"
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

	var endpoint string
	var children []*child
	defer func() {
		for i := len(children) - 1; i >= 0; i-- {
			children[i].stop()
		}
	}()
	if o.inproc {
		b, err := startBackend(dir, o.pfSize, "")
		if err != nil {
			return err
		}
		defer b.stop()
		endpoint = b.endpoint
	} else {
		b, err := startChild("-role", "backend", "-dir", dir, "-pf-size", itoa(o.pfSize))
		if err != nil {
			return err
		}
		children = append(children, b)
		endpoint = b.value
	}
	c, err := cri.Dial(ctx, endpoint, time.Minute)
	if err != nil {
		return err
	}
	defer c.Close()

	paths := []*path{{name: "direct", cri: c}}
	// The relay forwards to the runtime's streaming server, whose address
	// is in any URL the runtime issues.
	u, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: benchContainer, Cmd: []string{"emit", "0"}, Stdout: true})
	if err != nil {
		return err
	}
	rp := &path{name: "relay", cri: c}
	if o.inproc {
		rl, err := startRelay(u.Host)
		if err != nil {
			return err
		}
		defer rl.stop()
		rp.relay = rl.addr()
	} else {
		ch, err := startChild("-role", "relay", "-target", u.Host)
		if err != nil {
			return err
		}
		children = append(children, ch)
		rp.relay, rp.proc = ch.value, ch
	}
	paths = append(paths, rp)
	impls := []string{"upstream", "kubestream"}
	if o.want("audit") {
		impls = append(impls, "kubestream-audit") // the cost of the audit log, same run
	}
	for _, impl := range impls {
		p := &path{name: impl, cri: c}
		if o.inproc {
			h, err := translatorHandler(impl, c, dir)
			if err != nil {
				return err
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: h}
			go func() { _ = srv.Serve(l) }()
			defer srv.Close()
			p.base = "http://" + l.Addr().String()
		} else {
			args := []string{"-role", "translator", "-impl", impl, "-cri", endpoint, "-dir", dir}
			if o.profileDir != "" {
				args = append(args, "-profile-dir", o.profileDir)
			}
			ch, err := startChild(args...)
			if err != nil {
				return err
			}
			children = append(children, ch)
			p.base, p.proc = ch.value, ch
		}
		paths = append(paths, p)
	}

	r := newResults(o)
	if !o.inproc {
		r.backend = children[0]
	}
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
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

	if o.want("audit") {
		without, with := pathNamed(paths, "kubestream"), pathNamed(paths, "kubestream-audit")
		n := max(15, 5*o.reps)
		if o.want("stdout") {
			stdout := func(p *path) func() (time.Duration, error) {
				return func() (time.Duration, error) { return p.stdout(ctx, o.size) }
			}
			if r.auditPairs, err = paired(n, stdout(without), stdout(with)); err != nil {
				return fmt.Errorf("audit log pairs: %w", err)
			}
			logf("audit log: stdout with ÷ without, %d pairs, median %.3f; in order: %s", len(r.auditPairs), median(r.auditPairs), ratiosText(r.auditPairs))
		}
		tty := func(p *path, diskDir string) func() (time.Duration, error) {
			return func() (time.Duration, error) {
				d, err := p.ttyStdout(ctx, ttySize(o.size), diskDir)
				if err == nil && p == with {
					r.noteRecording(dir, ttySize(o.size))
				}
				return d, err
			}
		}
		if r.ttyPairs, err = paired(n, tty(without, ""), tty(with, "")); err != nil {
			return fmt.Errorf("recording pairs: %w", err)
		}
		logf("recording: tty stdout with ÷ without, %d pairs, median %.3f; in order: %s", len(r.ttyPairs), median(r.ttyPairs), ratiosText(r.ttyPairs))
		if r.diskPairs, err = paired(n, tty(without, ""), tty(without, dir)); err != nil {
			return fmt.Errorf("disk pairs: %w", err)
		}
		logf("the disk alone: tty stdout with a recording's writes beside ÷ without, %d pairs, median %.3f; in order: %s", len(r.diskPairs), median(r.diskPairs), ratiosText(r.diskPairs))
		// The recorder held to the disk, not the disk to itself: the
		// recorded session against the same session with the same bytes
		// written beside it and no recorder.
		if r.recorderPairs, err = paired(n, tty(without, dir), tty(with, "")); err != nil {
			return fmt.Errorf("recorder pairs: %w", err)
		}
		logf("the recorder: tty stdout recorded ÷ with the disk's writes alone, %d pairs, median %.3f; in order: %s", len(r.recorderPairs), median(r.recorderPairs), ratiosText(r.recorderPairs))
	}

	for _, n := range strings.Split(o.concurrency, ",") {
		if !o.want("concurrency") {
			break
		}
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

	if !o.inproc && o.want("idle") {
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
	}
	return r.write(o)
}

// paired measures what the audit log, a recording or a recording's disk
// writes cost a transfer, as throughput ratios of n back-to-back pairs
// (with ÷ without), the order alternating between pairs. Each cost is
// within this machine's spread from one transfer to the next: the medians
// of three unpaired repetitions, taken minutes apart, put the audit log's
// ratio anywhere between 0.93 and 1.01, and one tty session's anywhere
// within ±0.1.
func paired(n int, without, with func() (time.Duration, error)) ([]float64, error) {
	ratios := make([]float64, 0, n)
	for i := range n {
		first, second := without, with
		if i%2 == 1 {
			first, second = with, without
		}
		d0, err := first()
		if err != nil {
			return nil, fmt.Errorf("pair %d: %w", i, err)
		}
		d1, err := second()
		if err != nil {
			return nil, fmt.Errorf("pair %d: %w", i, err)
		}
		if i%2 == 1 {
			d0, d1 = d1, d0
		}
		ratios = append(ratios, d0.Seconds()/d1.Seconds()) // throughput with ÷ without
	}
	return ratios, nil
}

// pathNamed is the path of that name.
func pathNamed(paths []*path, name string) *path {
	for _, p := range paths {
		if p.name == name {
			return p
		}
	}
	return nil
}

// ttySize is the tty transfer: a recording writes all of it to disk (and
// goes after each repetition), so it is kept to 256 MiB a session; shorter
// transfers, a tenth of a second, left the ratio to chance.
func ttySize(size int64) int64 { return min(size, 256<<20) }

// noteRecording checks the recording a tty session of size bytes left in
// dir and removes it, to spare the disk. A recording that stopped (its disk
// fell behind) would make the figure a lie: it must hold every byte, and be
// closed (cut after its last event, not ending in the zeros it is
// allocated ahead with).
//
// The client has its exit status before the server's recorder has closed
// the file, so the check waits for it, a few seconds at most.
func (r *results) noteRecording(dir string, size int64) {
	var files []string
	complete := false
	for deadline := time.Now().Add(5 * time.Second); !complete && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		files, _ = filepath.Glob(filepath.Join(dir, "recordings", "*.cast"))
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Size() >= size && endsInNewline(f, st.Size()) {
				complete = true
			}
		}
	}
	for _, f := range files {
		_ = os.Remove(f)
	}
	if !complete && r.recordingCut == "" {
		r.recordingCut = "no reason on record"
		if why := recordingErrors(filepath.Join(dir, "audit.log")); why != "" {
			r.recordingCut = why
		}
	}
}

// measureRep takes one repetition of every figure selected by -only.
func measureRep(ctx context.Context, p *path, o options, r *results, dir string) error {
	gib := float64(1 << 30)
	perGiB := func(d time.Duration) float64 { return d.Seconds() * gib / float64(o.size) }
	if o.want("stdout") {
		cpu0, self0 := p.proc.cpu(), procCPU(os.Getpid())
		d, err := p.stdout(ctx, o.size)
		if err != nil {
			return fmt.Errorf("%s stdout: %w", p.name, err)
		}
		cpu1, self1 := p.proc.cpu(), procCPU(os.Getpid())
		r.stdoutMBps[p.name] = append(r.stdoutMBps[p.name], mbps(o.size, d))
		r.cpuStdout[p.name] = append(r.cpuStdout[p.name], perGiB(cpu1-cpu0))
		r.clientStdout[p.name] = append(r.clientStdout[p.name], perGiB(self1-self0))
	}
	if o.want("audit") && (p.name == "kubestream" || p.name == "kubestream-audit") {
		ttyGiB := func(d time.Duration) float64 { return d.Seconds() * gib / float64(ttySize(o.size)) }
		cpu0, self0, back0 := p.proc.cpu(), procCPU(os.Getpid()), r.backend.cpu()
		d, err := p.ttyStdout(ctx, ttySize(o.size), "")
		if err != nil {
			return fmt.Errorf("%s tty stdout: %w", p.name, err)
		}
		cpu1, self1, back1 := p.proc.cpu(), procCPU(os.Getpid()), r.backend.cpu()
		r.ttyMBps[p.name] = append(r.ttyMBps[p.name], mbps(ttySize(o.size), d))
		r.cpuTTY[p.name] = append(r.cpuTTY[p.name], ttyGiB(cpu1-cpu0))
		r.sessionTTY[p.name] = append(r.sessionTTY[p.name], ttyGiB(cpu1-cpu0+self1-self0+back1-back0))
		if p.name == "kubestream-audit" {
			fw, err := fileWriteCPU(dir, ttySize(o.size))
			if err != nil {
				return err
			}
			r.fileWrite = append(r.fileWrite, fw)
			r.noteRecording(dir, ttySize(o.size))
		}
	}
	if o.want("stdin") {
		cpu1, self1 := p.proc.cpu(), procCPU(os.Getpid())
		d, err := p.stdin(ctx, o.size)
		if err != nil {
			return fmt.Errorf("%s stdin: %w", p.name, err)
		}
		cpu2, self2 := p.proc.cpu(), procCPU(os.Getpid())
		r.stdinMBps[p.name] = append(r.stdinMBps[p.name], mbps(o.size, d))
		r.cpuStdin[p.name] = append(r.cpuStdin[p.name], perGiB(cpu2-cpu1))
		r.clientStdin[p.name] = append(r.clientStdin[p.name], perGiB(self2-self1))
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
		pfPerGiB := func(d time.Duration) float64 { return d.Seconds() * gib / float64(o.pfSize) }
		cpu0, self0 := p.proc.cpu(), procCPU(os.Getpid())
		d, err := p.portForward(ctx, o.pfSize, true)
		if err != nil {
			return fmt.Errorf("%s port-forward down: %w", p.name, err)
		}
		cpu1, self1 := p.proc.cpu(), procCPU(os.Getpid())
		r.pfDownMBps[p.name] = append(r.pfDownMBps[p.name], mbps(o.pfSize, d))
		r.cpuPfDown[p.name] = append(r.cpuPfDown[p.name], pfPerGiB(cpu1-cpu0))
		r.clientPfDown[p.name] = append(r.clientPfDown[p.name], pfPerGiB(self1-self0))
		if d, err = p.portForward(ctx, o.pfSize, false); err != nil {
			return fmt.Errorf("%s port-forward up: %w", p.name, err)
		}
		cpu2, self2 := p.proc.cpu(), procCPU(os.Getpid())
		r.pfUpMBps[p.name] = append(r.pfUpMBps[p.name], mbps(o.pfSize, d))
		r.cpuPfUp[p.name] = append(r.cpuPfUp[p.name], pfPerGiB(cpu2-cpu1))
		r.clientPfUp[p.name] = append(r.clientPfUp[p.name], pfPerGiB(self2-self1))
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func last(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return v[len(v)-1]
}

// fileWriteCPU is the CPU seconds per GiB this thread spends recording
// size bytes of output in the least work any recorder that never holds up
// its session can do: copy each 32 KiB frame out of the session's buffer
// into 128 KiB blocks (8 MiB of them, reused in turn) and write them to a
// new file in dir 1 MiB at a time, with direct I/O where the file system
// has it, as the recorder does; with no encoding. It is the floor under a
// recording's cost.
func fileWriteCPU(dir string, size int64) (float64, error) {
	frame := bytes.Repeat([]byte{'x'}, 32<<10)
	blocks := make([][]byte, 64)
	for i := range blocks {
		blocks[i] = make([]byte, 0, 128<<10)
	}
	fd, done, err := directFile(dir, "floor-*.cast")
	if err != nil {
		return 0, err
	}
	defer done()
	runtime.LockOSThread() // this thread's time alone
	defer runtime.UnlockOSThread()
	t0 := threadCPU()
	cur, first, off := 0, 0, int64(0)
	for n := int64(0); n < size; n += int64(len(frame)) {
		b := append(blocks[cur], frame...)
		blocks[cur] = b
		if len(b) < cap(b) {
			continue
		}
		if cur = (cur + 1) % len(blocks); (cur-first+len(blocks))%len(blocks) == 8 {
			w, err := unix.Pwritev(fd, blocks[first:first+8], off)
			if err != nil {
				return 0, err
			}
			off += int64(w)
			for i := first; i < first+8; i++ {
				blocks[i] = blocks[i][:0]
			}
			first = cur
		}
	}
	return (threadCPU() - t0).Seconds() * (1 << 30) / float64(size), nil
}

// directFile creates a file in dir for a recording's bytes, with direct
// I/O where the file system has it, as the recorder's (recording/file.go);
// done closes and removes it.
func directFile(dir, pattern string) (fd int, done func(), err error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return 0, nil, err
	}
	fd = int(f.Fd())
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags|unix.O_DIRECT)
	}
	return fd, func() { f.Close(); os.Remove(f.Name()) }, nil
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(rusageThread, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const rusageThread = 1 // RUSAGE_THREAD

// endsInNewline says whether the file of size bytes ends in a newline.
func endsInNewline(path string, size int64) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	last := make([]byte, 1)
	_, err = f.ReadAt(last, size-1)
	return err == nil && last[0] == '\n'
}

// recordingErrors is what the audit log says of recordings that failed.
func recordingErrors(path string) string {
	b, _ := os.ReadFile(path)
	var whys []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		var ev audit.Event
		if json.Unmarshal(line, &ev) == nil && ev.RecordingError != "" && !slices.Contains(whys, ev.RecordingError) {
			whys = append(whys, ev.RecordingError)
		}
	}
	return strings.Join(whys, "; ")
}
