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
package main

import (
	"bufio"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
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

func table(w io.Writer, dir, title, date, stock string, same bool, once *regexp.Regexp, workers []string) (bool, error) {
	results := map[string]map[string]result{} // case → worker → result
	var problems []string
	for _, wk := range workers {
		rs, setupFailure, err := readJunit(filepath.Join(dir, wk, "junit.xml"))
		if err != nil {
			return false, err
		}
		if setupFailure != "" {
			problems = append(problems, fmt.Sprintf("%s: suite set-up failed: %s", wk, setupFailure))
		}
		ran := 0
		for name, r := range rs {
			if results[name] == nil {
				results[name] = map[string]result{}
			}
			results[name][wk] = r
			if r.status != "skipped" {
				ran++
			}
		}
		if ran == 0 {
			problems = append(problems, wk+": no case ran")
		}
	}
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)

	fmt.Fprint(w, title)
	if date != "" {
		fmt.Fprintf(w, " (%s)", date)
	}
	fmt.Fprintln(w, ":")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| case | %s |\n|---|%s\n", strings.Join(workers, " | "), strings.Repeat("---|", len(workers)))
	totals := map[string]map[string]int{}
	for _, wk := range workers {
		totals[wk] = map[string]int{}
	}
	var skips, alike, leftOut []string
	for _, n := range names {
		everywhere := true
		for _, wk := range workers {
			if r, ok := results[n][wk]; !ok || r.status != "failed" {
				everywhere = false
			}
		}
		if same && everywhere {
			alike = append(alike, fmt.Sprintf("%s: %s", n, results[n][stock].reason))
		}
		cells := make([]string, len(workers))
		for i, wk := range workers {
			r, ok := results[n][wk]
			switch {
			case !ok && i > 0 && once != nil && once.MatchString(n):
				cells[i] = "left out"
				totals[wk]["not run"]++
			case !ok:
				cells[i] = "not run"
				totals[wk]["not run"]++
				problems = append(problems, fmt.Sprintf("%s: %q did not run", wk, n))
			case r.status == "passed":
				cells[i] = "pass"
			case r.status == "skipped":
				cells[i] = "skip"
				skips = append(skips, fmt.Sprintf("%s on %s: %s", n, wk, r.reason))
			case same && everywhere:
				cells[i] = "fail"
			default:
				cells[i] = "**FAIL**"
				problems = append(problems, fmt.Sprintf("%s: %q failed: %s", wk, n, r.reason))
			}
			if ok {
				totals[wk][r.status]++
			}
			if ok && wk != stock && r.status != "passed" && results[n][stock].status == "passed" {
				problems = append(problems, fmt.Sprintf("%q passes on %s and not on %s", n, stock, wk))
			}
		}
		if same && !everywhere {
			for _, wk := range workers[1:] {
				if results[n][wk].status != results[n][workers[0]].status {
					problems = append(problems, fmt.Sprintf("%q: %s on %s, %s on %s", n,
						results[n][workers[0]].status, workers[0], results[n][wk].status, wk))
				}
			}
		}
		if slices.Contains(cells, "left out") {
			leftOut = append(leftOut, n)
		}
		fmt.Fprintf(w, "| %s | %s |\n", escape(n), strings.Join(cells, " | "))
	}
	cells := make([]string, len(workers))
	for i, wk := range workers {
		t := totals[wk]
		cells[i] = fmt.Sprintf("%d pass, %d fail, %d skip", t["passed"], len(names)-t["passed"]-t["skipped"]-t["not run"], t["skipped"])
	}
	fmt.Fprintf(w, "| **total (%d cases)** | %s |\n", len(names), strings.Join(cells, " | "))
	if len(leftOut) > 0 {
		fmt.Fprintf(w, "\nRun on %s alone in this run (left out of the later passes to keep it short):\n", workers[0])
		for _, n := range leftOut {
			fmt.Fprintln(w, "- "+escape(n))
		}
	}
	if len(skips) > 0 {
		fmt.Fprintln(w, "\nSkipped by the cases themselves:")
		for _, s := range dedupe(skips) {
			fmt.Fprintln(w, "- "+escape(s))
		}
	}

	if len(alike) > 0 {
		fmt.Fprintln(w, "\nFailing alike on every one (what this machine cannot run), with the first line of the failure:")
		for _, s := range alike {
			fmt.Fprintln(w, "- "+escape(s))
		}
	}

	if _, err := os.Stat(filepath.Join(dir, workers[0], "metrics-after.txt")); err != nil {
		workers = nil // no metrics kept: not a cluster's run
	} else {
		fmt.Fprintln(w, "\nStreaming sessions the cases made, from each worker's own metrics (after − before):")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| worker | kubestream, by route | upstream's kubelet_websocket_streaming_requests_total | the runtime's kubestream server (containerd's, CRI-O's), by protocol |")
		fmt.Fprintln(w, "|---|---|---|---|")
	}
	for _, wk := range workers {
		routes, err := delta(filepath.Join(dir, wk), "metrics", "kubestream_streaming_requests_total", "route")
		if err != nil {
			return false, err
		}
		up, err := delta(filepath.Join(dir, wk), "metrics", "kubelet_websocket_streaming_requests_total", "")
		if err != nil {
			return false, err
		}
		rt, err := delta(filepath.Join(dir, wk), "runtime", "kubestream_runtime_streaming_requests_total", "protocol")
		if err != nil {
			return false, err
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", wk, counts(routes), counts(up), counts(rt))
	}
	if len(problems) > 0 {
		fmt.Fprintln(w, "\nProblems:")
		for _, p := range problems {
			fmt.Fprintln(w, "- "+escape(p))
		}
	}
	return len(problems) == 0, nil
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

// counts prints the non-zero counts, "—" when there are none (or no such
// metric).
func counts(m map[string]float64) string {
	var parts []string
	for k, v := range m {
		if v != 0 {
			if k == "all" {
				parts = append(parts, fmt.Sprintf("%g", v))
			} else {
				parts = append(parts, fmt.Sprintf("%s %g", k, v))
			}
		}
	}
	if len(parts) == 0 {
		return "—"
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
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

// escape keeps a case's name from breaking the table.
func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func dedupe(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
