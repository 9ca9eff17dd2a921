// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// table prints the table of the workers' reports under dir and says
// whether it found no problem.
func table(w io.Writer, dir, title, date, stock string, same bool, once *regexp.Regexp, workers []string) (bool, error) {
	t := &tally{w: w, stock: stock, same: same, once: once, workers: workers,
		results: map[string]map[string]result{}, totals: map[string]map[string]int{}}
	if err := t.read(dir); err != nil {
		return false, err
	}
	t.header(title, date)
	for _, n := range t.names {
		t.row(n)
	}
	t.footer()
	if err := t.sessions(dir); err != nil {
		return false, err
	}
	if len(t.problems) > 0 {
		fmt.Fprintln(w, "\nProblems:")
		for _, p := range t.problems {
			fmt.Fprintln(w, "- "+escape(p))
		}
	}
	return len(t.problems) == 0, nil
}

// tally is one table being printed: the workers' results, and what the
// rows found, for the lists below the table.
type tally struct {
	w       io.Writer
	stock   string
	same    bool
	once    *regexp.Regexp
	workers []string

	results                         map[string]map[string]result // case → worker → result
	names                           []string                     // the cases, sorted
	totals                          map[string]map[string]int    // worker → status → cases
	problems, skips, alike, leftOut []string
}

// read reads every worker's junit report.
func (t *tally) read(dir string) error {
	for _, wk := range t.workers {
		rs, setupFailure, err := readJunit(filepath.Join(dir, wk, "junit.xml"))
		if err != nil {
			return err
		}
		if setupFailure != "" {
			t.problems = append(t.problems, fmt.Sprintf("%s: suite set-up failed: %s", wk, setupFailure))
		}
		ran := 0
		for name, r := range rs {
			if t.results[name] == nil {
				t.results[name] = map[string]result{}
			}
			t.results[name][wk] = r
			if r.status != "skipped" {
				ran++
			}
		}
		if ran == 0 {
			t.problems = append(t.problems, wk+": no case ran")
		}
	}
	t.names = make([]string, 0, len(t.results))
	for n := range t.results {
		t.names = append(t.names, n)
	}
	sort.Strings(t.names)
	return nil
}

// header prints the heading and the table's header rows.
func (t *tally) header(title, date string) {
	w := t.w
	fmt.Fprint(w, title)
	if date != "" {
		fmt.Fprintf(w, " (%s)", date)
	}
	fmt.Fprintln(w, ":")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| case | %s |\n|---|%s\n", strings.Join(t.workers, " | "), strings.Repeat("---|", len(t.workers)))
	for _, wk := range t.workers {
		t.totals[wk] = map[string]int{}
	}
}

// row prints case n's row.
func (t *tally) row(n string) {
	everywhere := true
	for _, wk := range t.workers {
		if r, ok := t.results[n][wk]; !ok || r.status != "failed" {
			everywhere = false
		}
	}
	if t.same && everywhere {
		t.alike = append(t.alike, fmt.Sprintf("%s: %s", n, t.results[n][t.stock].reason))
	}
	cells := make([]string, len(t.workers))
	for i, wk := range t.workers {
		cells[i] = t.cell(n, i, wk, everywhere)
	}
	if t.same && !everywhere {
		workers, results := t.workers, t.results
		for _, wk := range workers[1:] {
			if results[n][wk].status != results[n][workers[0]].status {
				t.problems = append(t.problems, fmt.Sprintf("%q: %s on %s, %s on %s", n,
					results[n][workers[0]].status, workers[0], results[n][wk].status, wk))
			}
		}
	}
	if slices.Contains(cells, "left out") {
		t.leftOut = append(t.leftOut, n)
	}
	fmt.Fprintf(t.w, "| %s | %s |\n", escape(n), strings.Join(cells, " | "))
}

// cell is case n's cell for worker wk, the i-th, counted in its totals;
// everywhere says the case failed on every worker.
func (t *tally) cell(n string, i int, wk string, everywhere bool) string {
	var cell string
	r, ok := t.results[n][wk]
	switch {
	case !ok && i > 0 && t.once != nil && t.once.MatchString(n):
		cell = "left out"
		t.totals[wk]["not run"]++
	case !ok:
		cell = "not run"
		t.totals[wk]["not run"]++
		t.problems = append(t.problems, fmt.Sprintf("%s: %q did not run", wk, n))
	case r.status == "passed":
		cell = "pass"
	case r.status == "skipped":
		cell = "skip"
		t.skips = append(t.skips, fmt.Sprintf("%s on %s: %s", n, wk, r.reason))
	case t.same && everywhere:
		cell = "fail"
	default:
		cell = "**FAIL**"
		t.problems = append(t.problems, fmt.Sprintf("%s: %q failed: %s", wk, n, r.reason))
	}
	if ok {
		t.totals[wk][r.status]++
	}
	if ok && wk != t.stock && r.status != "passed" && t.results[n][t.stock].status == "passed" {
		t.problems = append(t.problems, fmt.Sprintf("%q passes on %s and not on %s", n, t.stock, wk))
	}
	return cell
}

// footer prints the totals row and the lists of cases left out, skipped
// and failing alike.
func (t *tally) footer() {
	w := t.w
	cells := make([]string, len(t.workers))
	for i, wk := range t.workers {
		tt := t.totals[wk]
		cells[i] = fmt.Sprintf("%d pass, %d fail, %d skip", tt["passed"], len(t.names)-tt["passed"]-tt["skipped"]-tt["not run"], tt["skipped"])
	}
	fmt.Fprintf(w, "| **total (%d cases)** | %s |\n", len(t.names), strings.Join(cells, " | "))
	if len(t.leftOut) > 0 {
		fmt.Fprintf(w, "\nRun on %s alone in this run (left out of the later passes to keep it short):\n", t.workers[0])
		for _, n := range t.leftOut {
			fmt.Fprintln(w, "- "+escape(n))
		}
	}
	if len(t.skips) > 0 {
		fmt.Fprintln(w, "\nSkipped by the cases themselves:")
		for _, s := range dedupe(t.skips) {
			fmt.Fprintln(w, "- "+escape(s))
		}
	}

	if len(t.alike) > 0 {
		fmt.Fprintln(w, "\nFailing alike on every one (what this machine cannot run), with the first line of the failure:")
		for _, s := range t.alike {
			fmt.Fprintln(w, "- "+escape(s))
		}
	}
}

// sessions prints the streaming sessions each worker's metrics counted,
// when the run kept them (a cluster's run).
func (t *tally) sessions(dir string) error {
	w, workers := t.w, t.workers
	if _, err := os.Stat(filepath.Join(dir, workers[0], "metrics-after.txt")); err != nil {
		return nil // no metrics kept: not a cluster's run
	}
	fmt.Fprintln(w, "\nStreaming sessions the cases made, from each worker's own metrics (after − before):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| worker | kubestream, by route | upstream's kubelet_websocket_streaming_requests_total | the runtime's kubestream server (containerd's, CRI-O's), by protocol |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, wk := range workers {
		routes, err := delta(filepath.Join(dir, wk), "metrics", "kubestream_streaming_requests_total", "route")
		if err != nil {
			return err
		}
		up, err := delta(filepath.Join(dir, wk), "metrics", "kubelet_websocket_streaming_requests_total", "")
		if err != nil {
			return err
		}
		rt, err := delta(filepath.Join(dir, wk), "runtime", "kubestream_runtime_streaming_requests_total", "protocol")
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", wk, counts(routes), counts(up), counts(rt))
	}
	return nil
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
