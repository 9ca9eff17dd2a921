// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// otherFlags are the flags the docs name that belong to other tools, each
// with the tool. A flag of kubestream's own belongs in its code, not here.
var otherFlags = map[string]string{
	"feature-gates": "the kubelet's, and kubestream serve's through component-base's FeatureGate.AddFlag",
	"attach":        "kubectl run",
	"list-images":   "Kubernetes' e2e.test",
	"nofile":        "prlimit",
	"privileged":    "docker run",
	"pid-file":      "runc exec (hack/crio/exec.patch)",
}

// otherPaths are paths in other projects' trees that the docs name and
// that begin like a directory of this one, each with its project.
var otherPaths = map[string]string{
	"cmd/kubelet":  "Kubernetes (the kubelet's main package)",
	"internal/cri": "containerd (its CRI plugin, which hack/containerd's patches change)",
}

type ref struct {
	doc  string
	line int
	kind string // "file", "test" or "flag"
	name string
}

func (r ref) String() string { return fmt.Sprintf("%s:%d: %s %s", r.doc, r.line, r.kind, r.name) }

var (
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	tickRE     = regexp.MustCompile("`([^`]+)`")
	testRE     = regexp.MustCompile(`(?:\b([a-z][a-z0-9_]*)\.)?\b((?:Test|Fuzz|Benchmark)[A-Z0-9_][A-Za-z0-9_]*)`)
	flagRE     = regexp.MustCompile(`(?:^|[\s(\x60"'=\[|,/])--([a-z][a-z0-9.]*(?:-[a-z0-9.]+)*)`)
	testSuffix = regexp.MustCompile(`\.(?:Test|Fuzz|Benchmark)\w*$`)
)

// scan returns the references in one markdown document, doc being its path
// relative to the root (for links relative to it).
func scan(doc string, lines []mdLine, tops map[string]bool) []ref {
	var refs []ref
	for _, l := range lines {
		if l.fence || l.fenced && !shellFence[l.lang] {
			continue
		}
		add := func(kind, name string) { refs = append(refs, ref{doc, l.n, kind, name}) }
		var words []string
		if l.fenced {
			words = strings.Fields(l.text)
		} else {
			for _, m := range linkRE.FindAllStringSubmatch(l.text, -1) {
				if p, ok := linkTarget(doc, m[1]); ok {
					add("file", p)
				}
			}
			for _, m := range tickRE.FindAllStringSubmatch(l.text, -1) {
				words = append(words, strings.Fields(m[1])...)
			}
		}
		for _, w := range words {
			if p, ok := repoPath(w, tops); ok {
				add("file", p)
			}
		}
		for _, m := range testRE.FindAllStringSubmatch(l.text, -1) {
			name := m[2]
			if m[1] != "" {
				name = m[1] + "." + m[2]
			}
			add("test", name)
		}
		for _, m := range flagRE.FindAllStringSubmatch(l.text, -1) {
			add("flag", strings.TrimRight(m[1], "."))
		}
	}
	return refs
}

// linkTarget is a link's repository path, false for a URL or an anchor.
func linkTarget(doc, target string) (string, bool) {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
		return "", false
	}
	target, _, _ = strings.Cut(target, "#")
	return path.Clean(path.Join(path.Dir(doc), target)), true
}

// repoPath is a word's repository path when it starts with a top-level
// directory of the repository (after ./ and surrounding punctuation).
func repoPath(w string, tops map[string]bool) (string, bool) {
	w = strings.Trim(w, `"'(),;`)
	w = strings.TrimPrefix(w, "./")
	if i := strings.IndexAny(w, ":@="); i >= 0 {
		w = w[:i]
	}
	w = strings.TrimSuffix(strings.TrimSuffix(w, "/..."), "/")
	if m := testSuffix.FindStringIndex(w); m != nil {
		w = w[:m[0]] // cri/streaming.FuzzV5Client: the test is checked as a test
	}
	first, _, ok := strings.Cut(w, "/")
	if !ok || !tops[first] || strings.ContainsAny(w, "<>{}$…") {
		return "", false
	}
	return path.Clean(w), true
}

// check returns the references among refs that name nothing in the tree.
func check(root string, refs []ref, testNames map[string]map[string]bool, flagNames map[string]bool, ignored []string) []ref {
	var bad []ref
	for _, r := range refs {
		ok := true
		switch r.kind {
		case "file":
			if generated(r.name, ignored) || under(r.name, otherPaths) {
				continue
			}
			m, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(r.name)))
			ok = len(m) > 0
		case "test":
			pkg, name, qualified := strings.Cut(r.name, ".")
			if !qualified {
				name = pkg
			}
			pkgs := testNames[name]
			ok = pkgs != nil && (!qualified || pkgs[pkg])
		case "flag":
			_, other := otherFlags[r.name]
			ok = flagNames[r.name] || other
		}
		if !ok {
			bad = append(bad, r)
		}
	}
	return bad
}

// generated tells whether p is build output, which need not exist: a path
// with a segment starting with _ (_output, hack/kube/_kubernetes) or under
// one of the directories .gitignore anchors at the root (bench/profiles).
func generated(p string, ignored []string) bool {
	for _, seg := range strings.Split(p, "/") {
		if strings.HasPrefix(seg, "_") {
			return true
		}
	}
	for _, pat := range ignored {
		segs := strings.Split(p, "/")
		n := strings.Count(pat, "/") + 1
		if len(segs) >= n {
			if ok, _ := path.Match(pat, strings.Join(segs[:n], "/")); ok {
				return true
			}
		}
	}
	return false
}

// under tells whether p is one of prefixes or below one.
func under(p string, prefixes map[string]string) bool {
	for pre := range prefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// gitignored are the root-anchored entries of root's .gitignore
// (/bench/profiles/ → bench/profiles).
func gitignored(root string) []string {
	data, _ := os.ReadFile(filepath.Join(root, ".gitignore"))
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "/") {
			out = append(out, strings.Trim(l, "/"))
		}
	}
	return out
}
