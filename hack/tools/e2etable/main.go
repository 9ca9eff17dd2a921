// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command e2etable reads the junit reports and metrics that
// hack/upstream-e2e.sh leaves for each worker (DIR/<worker>/junit.xml,
// metrics-before.txt, metrics-after.txt, and runtime-*.txt where the
// worker's containerd has kubestream's server) and prints a Markdown table:
// each case that ran × each worker, pass, fail or skip (with the skip's
// reason), the totals, and the streaming sessions the cases made on each
// worker, by route.
//
// It exits 1 when a case failed on any worker, when a pass ran no case, or
// when a case passed on the stock worker and not on another: kubestream's
// nodes must pass whatever the stock kubelet passes. Cases matching
// -first-only ran on the first worker alone (a shorter run that left them
// out of the later passes): elsewhere they are shown as left out, not as
// missing.
//
//	go run ./hack/tools/e2etable -dir _output/upstream-e2e -stock stock ws skew stock
//
// Reading order: main.go (flags, the junit reports and the counters read),
// then table.go (the Markdown tables written from them). What runs back
// up: table.go reads each worker's reports and counters with main.go's
// readers, beside the table that needs them.
package main

import (
	"bufio"
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// junit is the part of ginkgo's junit report read here.
type junit struct {
	Suites []struct {
		Cases []struct {
			Name    string `xml:"name,attr"`
			Status  string `xml:"status,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failure *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// result is one case on one worker.
type result struct {
	status string // passed, failed, skipped
	reason string // a skip's or a failure's message, first line
}

func main() {
	dir := flag.String("dir", "_output/upstream-e2e", "the run's output directory")
	date := flag.String("date", "", "the run's date, for the heading")
	stock := flag.String("stock", "stock", "the worker running upstream's kubelet")
	title := flag.String("title", "Kubernetes v1.37.2 e2e, focused on the streaming path, on the kind cluster's workers", "the table's heading")
	same := flag.Bool("same", false, "a case that fails alike everywhere is listed, not a problem: only a difference is")
	firstOnly := flag.String("first-only", "", "a regular expression: the cases it matches ran on the first worker alone")
	flag.Parse()
	workers := flag.Args()
	if len(workers) == 0 {
		fmt.Fprintln(os.Stderr, "e2etable: name the workers")
		os.Exit(2)
	}
	var once *regexp.Regexp
	if *firstOnly != "" {
		var err error
		if once, err = regexp.Compile(*firstOnly); err != nil {
			fmt.Fprintln(os.Stderr, "e2etable: -first-only:", err)
			os.Exit(2)
		}
	}
	ok, err := table(os.Stdout, *dir, *title, *date, *stock, *same, once, workers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2etable:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// readJunit returns the report's It cases by name, and the first failure
// of a suite-level node (set-up or tear-down), which fails every case.
func readJunit(path string) (map[string]result, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var j junit
	if err := xml.Unmarshal(b, &j); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	rs := map[string]result{}
	setup := ""
	for _, s := range j.Suites {
		for _, c := range s.Cases {
			name, isIt := strings.CutPrefix(c.Name, "[It] ")
			switch {
			case !isIt:
				if c.Failure != nil && setup == "" {
					setup = c.Name + ": " + firstLine(c.Failure.Message)
				}
			case c.Status == "skipped" && c.Skipped != nil && c.Skipped.Message == "skipped":
				// Outside the focus: ginkgo lists every case it did not run.
			case c.Status == "skipped":
				reason := ""
				if c.Skipped != nil {
					reason = strings.TrimPrefix(c.Skipped.Message, "skipped - ")
				}
				rs[name] = result{status: "skipped", reason: firstLine(reason)}
			case c.Status == "passed":
				rs[name] = result{status: "passed"}
			default:
				reason := c.Status
				if c.Failure != nil {
					reason = firstLine(c.Failure.Message)
				}
				rs[name] = result{status: "failed", reason: reason}
			}
		}
	}
	return rs, setup, nil
}

var sample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? ([0-9.eE+-]+)$`)

// delta sums each worker's samples of metric by the label named (all
// together when label is ""), after minus before.
func delta(dir, prefix, metric, label string) (map[string]float64, error) {
	before, err := samples(filepath.Join(dir, prefix+"-before.txt"), metric, label)
	if err != nil {
		return nil, err
	}
	after, err := samples(filepath.Join(dir, prefix+"-after.txt"), metric, label)
	if err != nil {
		return nil, err
	}
	for k := range after {
		after[k] -= before[k]
	}
	return after, nil
}

func samples(path, metric, label string) (map[string]float64, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]float64{}
	var byLabel *regexp.Regexp
	if label != "" {
		byLabel = regexp.MustCompile(label + `="([^"]*)"`)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := sample.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != metric {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		key := "all"
		if byLabel != nil {
			if l := byLabel.FindStringSubmatch(m[2]); l != nil {
				key = l[1]
			}
		}
		out[key] += v
	}
	return out, sc.Err()
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
