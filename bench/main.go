// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command bench measures kubestream's translator side by side with the two
// things users have today, in one run, alternating A/B/C (and a fourth path
// that shows what any translator process must cost at least):
//
//	direct      client-go's SPDY executor straight to the runtime's URL
//	relay       the same, through a TCP relay process that copies bytes
//	            and nothing else (relay.go): the ceiling for a translator
//	upstream    client-go's WebSocket executor → k8s.io/apiserver's
//	            StreamTranslatorHandler / TunnelingHandler → runtime
//	kubestream  client-go's WebSocket executor → kubestream's server → runtime
//
// The runtime is k8s.io/cri-streaming with in-process commands (backend.go).
// By default client, translators and backend are separate processes, so each
// translator's own CPU and memory are visible; -inproc runs all in one.
//
//	go run ./bench -out bench/results.md      (make bench)
//
// Reading order, each file before the files it uses: main.go (flags, the
// groups, and the child processes' entry points), run.go (the translator
// paths started and measured, alternated) with figures.go (one
// repetition's figures), measure.go and portforward.go (one figure over
// one path), audit.go (kubestream with an audit log and recordings),
// pairs.go (paired measurements and their verdict), report.go and
// report_audit.go (results.md), runtime.go and runtime_report.go (-only
// runtime: the runtime-side servers and the node's chain), reverse.go,
// reverse_load.go and reverse_report.go (-only reverse: reverse and UDP
// port-forward beside forward), then child.go (a measured process),
// translators.go (the translators as handlers), backend.go (the runtime
// and its in-process commands), relay.go (the byte-copying relay) and
// stats.go (medians and rates).
//
// What runs back up the order: the measuring files hang on run.go's
// results and measure.go's path (one type's methods spread by job), and
// main.go's child entry points start what backend.go, relay.go,
// translators.go and reverse.go serve.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/server"
)

type options struct {
	role, impl, criEndpoint, dir, out, svg, profileDir string
	target                                             string
	size, pfSize                                       int64
	reps, setupN, echoN, idleMax, connN                int
	inproc                                             bool
	concurrency, only                                  string
}

// want reports whether -only selects a figure group (all when empty).
func (o options) want(group string) bool {
	if o.only == "" {
		return true
	}
	for _, g := range strings.Split(o.only, ",") {
		if strings.TrimSpace(g) == group {
			return true
		}
	}
	return false
}

func main() {
	var o options
	flag.StringVar(&o.role, "role", "run", "run (orchestrate), backend, translator, relay or serve (internal)")
	flag.StringVar(&o.target, "target", "", "the relay's destination, host:port (internal)")
	flag.StringVar(&o.impl, "impl", "", "translator implementation: upstream or kubestream (internal)")
	flag.StringVar(&o.criEndpoint, "cri", "", "backend CRI endpoint (internal)")
	flag.StringVar(&o.dir, "dir", "", "working directory (internal)")
	flag.StringVar(&o.out, "out", "bench/results.md", "Markdown results file")
	flag.StringVar(&o.svg, "svg", "bench/results.svg", "chart of the ratios")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write each translator's CPU and alloc profiles here")
	flag.Int64Var(&o.size, "size", 1<<30, "bytes per throughput transfer")
	flag.Int64Var(&o.pfSize, "pf-size", 1<<30, "bytes per port-forward transfer")
	flag.IntVar(&o.reps, "reps", 3, "repetitions (medians are reported); -only audit measures max(15, 5×reps) back-to-back pairs a figure (-reps 20: 100, enough to call the recorder's target)")
	flag.IntVar(&o.setupN, "setup-n", 50, "sessions per setup measurement")
	flag.IntVar(&o.echoN, "echo-n", 2000, "round trips per echo measurement")
	flag.IntVar(&o.connN, "conn-n", 1000, "short connections per connection-rate measurement (-only reverse)")
	// Each session holds two descriptors in the translator, and this
	// machine's hard RLIMIT_NOFILE is 20,000 (raising it needs
	// CAP_SYS_RESOURCE), so 9,000 is the most that fits with room to spare.
	flag.IntVar(&o.idleMax, "idle-max", 9000, "most idle sessions held at once (2 descriptors each in the translator)")
	flag.StringVar(&o.concurrency, "concurrency", "1,4,16,64", "concurrent transfer counts")
	flag.BoolVar(&o.inproc, "inproc", false, "run backend and translators in this process")
	flag.StringVar(&o.only, "only", "", "comma-separated figure groups to measure: stdout, stdin, echo, setup, pf, concurrency, idle, audit (kubestream with an audit log and recordings as a third translator; default all); or runtime alone: the runtime-side server against cri-streaming, and the node's whole chain (runtime.go); or reverse alone: reverse port-forward beside forward, and UDP (reverse.go)")
	klog.InitFlags(nil)
	flag.Parse()
	if flag.Lookup("v").Value.String() == "0" {
		// Upstream's translator logs every client hang-up at error level
		// (spdystream's "Error on socket receive"); the figures are the
		// output here. -v=1 or more keeps all logs.
		_ = flag.Set("logtostderr", "false")
		_ = flag.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	}
	raiseFileLimit()
	var err error
	switch o.role {
	case "backend":
		err = runBackend(o)
	case "translator":
		err = runTranslator(o)
	case "relay":
		var r *relay
		if r, err = startRelay(o.target); err == nil {
			fmt.Println("READY", r.addr())
			waitSignal()
			r.stop()
		}
	case "serve": // kubestream serve on the reference runtime (-only reverse)
		err = runServe()
	default:
		switch o.only {
		case "runtime":
			err = orchestrateRuntime(o)
		case "reverse":
			err = orchestrateReverse(o)
		default:
			err = orchestrate(o)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// raiseFileLimit lifts the soft descriptor limit as far as allowed: idle
// sessions need two descriptors each in the translator.
func raiseFileLimit() {
	lim := syscall.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
}

func waitSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	<-ch
}

func runBackend(o options) error {
	b, err := startBackend(o.dir, o.pfSize, o.impl)
	if err != nil {
		return err
	}
	fmt.Println("READY", b.endpoint)
	waitSignal()
	b.stop()
	return nil
}

type procStats struct {
	Goroutines int    `json:"goroutines"`
	HeapInuse  uint64 `json:"heapInuse"`
}

func translatorHandler(impl string, c *cri.Client, dir string) (http.Handler, error) {
	switch impl {
	case "upstream":
		return upstreamHandler(c), nil
	case "kubestream-direct": // in front of a runtime that speaks v5: spliced
		return server.New(server.Config{Lookup: staticLookup{}, Runtime: c, Direct: server.DirectConfig{Mode: server.DirectAuto}})
	case "kubestream-audit":
		return kubestreamAuditHandler(c, dir)
	}
	return kubestreamHandler(c)
}

// serveStats answers /debug/bench-stats: goroutines and heap in use, after
// returning freed memory, so RSS readings compare like with like.
func serveStats(w http.ResponseWriter, _ *http.Request) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	_ = json.NewEncoder(w).Encode(procStats{Goroutines: runtime.NumGoroutine(), HeapInuse: ms.HeapInuse})
}

func runTranslator(o options) error {
	c, err := cri.Dial(context.Background(), o.criEndpoint, time.Minute)
	if err != nil {
		return err
	}
	h, err := translatorHandler(o.impl, c, o.dir)
	if err != nil {
		return err
	}
	if o.profileDir != "" {
		f, err := os.Create(fmt.Sprintf("%s/%s.cpu.pprof", o.profileDir, o.impl))
		if err != nil {
			return err
		}
		runtime.MemProfileRate = 64 * 1024
		_ = pprof.StartCPUProfile(f)
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
			if hf, err := os.Create(fmt.Sprintf("%s/%s.allocs.pprof", o.profileDir, o.impl)); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(hf, 0)
				hf.Close()
			}
		}()
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("/debug/bench-stats", serveStats)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(l, mux) }()
	fmt.Println("READY", "http://"+l.Addr().String())
	waitSignal()
	return nil
}
