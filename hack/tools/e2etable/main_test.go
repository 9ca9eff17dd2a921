// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// junitOf writes a ginkgo-style junit report of cases (name → status,
// "skipped" for one outside the focus, "skip:reason" for a case that
// skipped itself) into dir/worker/junit.xml.
func junitOf(t *testing.T, dir, worker string, cases map[string]string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`<testsuites><testsuite name="Kubernetes e2e suite">`)
	b.WriteString(`<testcase name="[SynchronizedBeforeSuite]" status="passed"></testcase>`)
	for name, status := range cases {
		switch {
		case status == "outside":
			b.WriteString(`<testcase name="[It] ` + name + `" status="skipped"><skipped message="skipped"></skipped></testcase>`)
		case strings.HasPrefix(status, "skip:"):
			b.WriteString(`<testcase name="[It] ` + name + `" status="skipped"><skipped message="skipped - ` + status[5:] + `"></skipped></testcase>`)
		case status == "failed":
			b.WriteString(`<testcase name="[It] ` + name + `" status="failed"><failure message="boom&#xA;more" type="failed"></failure></testcase>`)
		default:
			b.WriteString(`<testcase name="[It] ` + name + `" status="` + status + `"></testcase>`)
		}
	}
	b.WriteString(`</testsuite></testsuites>`)
	if err := os.MkdirAll(filepath.Join(dir, worker), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, worker, "junit.xml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTable(t *testing.T) {
	for _, c := range []struct {
		name    string
		same    bool
		once    string // -first-only
		workers map[string]map[string]string
		ok      bool
		want    []string // in the output
	}{{
		name: "all pass, one skips itself, one outside the focus",
		workers: map[string]map[string]string{
			"ws":    {"exec": "passed", "proxy": "skip:on localhost", "other": "outside"},
			"stock": {"exec": "passed", "proxy": "skip:on localhost", "other": "outside"},
		},
		ok:   true,
		want: []string{"| exec | pass | pass |", "| proxy | skip | skip |", "proxy on ws: on localhost", "**total (2 cases)**"},
	}, {
		name: "passes on stock, fails on kubestream",
		workers: map[string]map[string]string{
			"ws":    {"exec": "failed"},
			"stock": {"exec": "passed"},
		},
		want: []string{"**FAIL**", `"exec" passes on stock and not on ws`, "ws: \"exec\" failed: boom"},
	}, {
		name: "a pass that ran nothing",
		workers: map[string]map[string]string{
			"ws":    {"exec": "outside"},
			"stock": {"exec": "passed"},
		},
		want: []string{"ws: no case ran"},
	}, {
		name: "same: failing alike is listed, not a problem",
		same: true,
		workers: map[string]map[string]string{
			"ws":    {"digest": "failed", "exec": "passed"},
			"stock": {"digest": "failed", "exec": "passed"},
		},
		ok:   true,
		want: []string{"| digest | fail | fail |", "Failing alike", "digest: boom"},
	}, {
		name: "same: a difference is a problem, whichever way",
		same: true,
		workers: map[string]map[string]string{
			"ws":    {"exec": "passed"},
			"stock": {"exec": "failed"},
		},
		want: []string{`"exec": failed on stock, passed on ws`},
	}, {
		name: "first-only: a case left out of the later passes is not missing",
		once: "1000 times",
		workers: map[string]map[string]string{
			"stock": {"exec 1000 times": "passed", "logs": "passed"},
			"ws":    {"exec 1000 times": "outside", "logs": "passed"},
		},
		ok:   true,
		want: []string{"| exec 1000 times | pass | left out |", "Run on stock alone in this run", "- exec 1000 times"},
	}, {
		name: "first-only: it still fails where it ran, and other absences are missing",
		once: "1000 times",
		workers: map[string]map[string]string{
			"stock": {"exec 1000 times": "failed", "logs": "passed"},
			"ws":    {"exec 1000 times": "outside", "logs": "outside", "cp": "passed"},
		},
		want: []string{`stock: "exec 1000 times" failed`, `ws: "logs" did not run`},
	}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for w, cases := range c.workers {
				junitOf(t, dir, w, cases)
			}
			var out strings.Builder
			var once *regexp.Regexp
			if c.once != "" {
				once = regexp.MustCompile(c.once)
			}
			ok, err := table(&out, dir, "title", "", "stock", c.same, once, []string{"stock", "ws"})
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.ok {
				t.Errorf("ok = %v, want %v:\n%s", ok, c.ok, out.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestDelta: the sessions by route are the after − before of each label.
func TestDelta(t *testing.T) {
	dir := t.TempDir()
	before := "kubestream_streaming_requests_total{protocol=\"v5.channel.k8s.io\",route=\"direct\",subresource=\"exec\"} 3\n"
	after := before + "kubestream_streaming_requests_total{protocol=\"v5.channel.k8s.io\",route=\"direct\",subresource=\"attach\"} 2\n" +
		"kubestream_streaming_requests_total{protocol=\"v4.channel.k8s.io\",route=\"proxied-spdy\",subresource=\"attach\"} 1\n"
	after = strings.Replace(after, "} 3\n", "} 10\n", 1)
	_ = os.WriteFile(filepath.Join(dir, "metrics-before.txt"), []byte(before), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "metrics-after.txt"), []byte(after), 0o644)
	d, err := delta(dir, "metrics", "kubestream_streaming_requests_total", "route")
	if err != nil {
		t.Fatal(err)
	}
	if got := counts(d); got != "direct 9, proxied-spdy 1" {
		t.Fatalf("counts = %q", got)
	}
}
