// Command docrefs fails when README.md or docs/*.md name a test, a flag or
// a file of the repository that does not exist, so that the docs cannot
// drift from the code unseen. make lint runs it (and so make test).
//
// What it reads as a reference, outside fenced code blocks in a language
// other than a shell's (those show another project's code: a kubelet's Go,
// containerd's, a configuration file):
//
//   - a link's target, relative to the document ([x](../server/stream.go));
//   - a word in backticks, or in a shell block, that starts with one of the
//     repository's top-level directories (`hack/containerd.sh`,
//     `./cmd/kubestream`); a glob (`server/limits_*.go`) must match a file;
//   - a Go test, fuzz target or benchmark (TestXxx, pkg.TestXxx, FuzzXxx,
//     BenchmarkXxx, anywhere in the text): it exists if some _test.go of
//     the repository, or a _test.go that one of its patches adds, declares
//     func TestXxx( — in package pkg when the name is qualified;
//   - a flag (--some-flag): it exists if cmd/kubestream or config/
//     registers it, or it is another tool's flag in otherFlags below.
//
// Usage: go run ./hack/tools/docrefs [-root DIR] [-v]
package main

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
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
	fenceRE    = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")
	shellFence = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true, "text": true}
)

// scan returns the references in one markdown document, doc being its path
// relative to the root (for links relative to it).
func scan(doc, text string, tops map[string]bool) []ref {
	var refs []ref
	inFence, skip := "", false
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			if inFence == "" {
				inFence, skip = m[1][:3], !shellFence[strings.ToLower(m[2])]
				continue
			}
			if strings.HasPrefix(strings.TrimSpace(line), inFence) && m[2] == "" {
				inFence, skip = "", false
				continue
			}
		}
		if skip {
			continue
		}
		add := func(kind, name string) { refs = append(refs, ref{doc, n, kind, name}) }
		var words []string
		if inFence != "" {
			words = strings.Fields(line)
		} else {
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				if p, ok := linkTarget(doc, m[1]); ok {
					add("file", p)
				}
			}
			for _, m := range tickRE.FindAllStringSubmatch(line, -1) {
				words = append(words, strings.Fields(m[1])...)
			}
		}
		for _, w := range words {
			if p, ok := repoPath(w, tops); ok {
				add("file", p)
			}
		}
		for _, m := range testRE.FindAllStringSubmatch(line, -1) {
			name := m[2]
			if m[1] != "" {
				name = m[1] + "." + m[2]
			}
			add("test", name)
		}
		for _, m := range flagRE.FindAllStringSubmatch(line, -1) {
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

// tests are the test, fuzz and benchmark functions of the tree by name,
// each with the packages (the package clause's name, less _test) that
// declare it.
func tests(root string) (map[string]map[string]bool, error) {
	found := map[string]map[string]bool{}
	add := func(name, pkg string) {
		if found[name] == nil {
			found[name] = map[string]bool{}
		}
		found[name][pkg] = true
	}
	funcRE := regexp.MustCompile(`(?m)^\+?func ((?:Test|Fuzz|Benchmark)\w*)\(`)
	pkgRE := regexp.MustCompile(`(?m)^\+?package (\w+)`)
	diffRE := regexp.MustCompile(`(?m)^\+\+\+ b/(\S+)`)
	err := walk(root, func(p string, data []byte) {
		switch {
		case strings.HasSuffix(p, "_test.go"):
			pkg := ""
			if m := pkgRE.FindSubmatch(data); m != nil {
				pkg = strings.TrimSuffix(string(m[1]), "_test")
			}
			for _, m := range funcRE.FindAllSubmatch(data, -1) {
				add(string(m[1]), pkg)
			}
		case strings.HasSuffix(p, ".patch"):
			// A patch's added tests: each file's part after its +++ line.
			idx := diffRE.FindAllSubmatchIndex(data, -1)
			for i, m := range idx {
				file := string(data[m[2]:m[3]])
				if !strings.HasSuffix(file, "_test.go") {
					continue
				}
				end := len(data)
				if i+1 < len(idx) {
					end = idx[i+1][0]
				}
				part := data[m[1]:end]
				pkg := path.Base(path.Dir(file))
				if pm := pkgRE.FindSubmatch(part); pm != nil {
					pkg = strings.TrimSuffix(string(pm[1]), "_test")
				}
				for _, fm := range funcRE.FindAllSubmatch(part, -1) {
					add(string(fm[1]), pkg)
				}
			}
		}
	})
	return found, err
}

// walk calls f with each .go and .patch file below root, skipping what is
// not the repository's own (.git, build output).
func walk(root string, f func(rel string, data []byte)) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "_output", "_kubernetes", "bin", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, ".patch") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		f(filepath.ToSlash(rel), data)
		return nil
	})
}

// flagCall matches pflag's and the flag package's registering methods.
var flagCall = regexp.MustCompile(`^(Bool|Int|Int64|Uint|Float64|String|StringSlice|StringArray|Duration|Var|Func)(Var)?P?$`)

// flags are the flags cmd/kubestream, the plugin and config/ register: the name in
// each call of a registering method (fs.StringVar(&x, "name", …)) and
// each constant named …FlagName.
func flags(root string) (map[string]bool, error) {
	found := map[string]bool{}
	fset := token.NewFileSet()
	for _, dir := range []string{"cmd/kubestream", "cmd/kubectl-kubestream", "config"} {
		if _, err := os.Stat(filepath.Join(root, dir)); errors.Is(err, fs.ErrNotExist) {
			continue // a tree without it (the tests' own) names none of its flags
		}
		err := walk(filepath.Join(root, dir), func(p string, data []byte) {
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return
			}
			f, err := parser.ParseFile(fset, p, data, 0)
			if err != nil {
				return
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok || !flagCall.MatchString(sel.Sel.Name) {
						return true
					}
					for _, a := range n.Args {
						if s, ok := stringLit(a); ok {
							found[s] = true
							break
						}
					}
				case *ast.ValueSpec:
					for i, id := range n.Names {
						if strings.HasSuffix(id.Name, "FlagName") && i < len(n.Values) {
							if s, ok := stringLit(n.Values[i]); ok {
								found[s] = true
							}
						}
					}
				}
				return true
			})
		})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
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

// docs are README.md and docs/*.md, relative to root.
func docs(root string) []string {
	out := []string{"README.md"}
	m, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, p := range m {
		out = append(out, "docs/"+filepath.Base(p))
	}
	sort.Strings(out[1:])
	return out
}

func topLevel(root string) map[string]bool {
	tops := map[string]bool{}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(e.Name(), "_") && e.Name() != "bin" {
			tops[e.Name()] = true
		}
	}
	return tops
}

func run(root string, verbose bool) ([]ref, error) {
	testNames, err := tests(root)
	if err != nil {
		return nil, err
	}
	flagNames, err := flags(root)
	if err != nil {
		return nil, err
	}
	tops, ignored := topLevel(root), gitignored(root)
	var bad []ref
	for _, doc := range docs(root) {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			return nil, err
		}
		refs := scan(doc, string(data), tops)
		if verbose {
			for _, r := range refs {
				fmt.Println(r)
			}
		}
		bad = append(bad, check(root, refs, testNames, flagNames, ignored)...)
	}
	return bad, nil
}

func main() {
	root := flag.String("root", ".", "the repository's root")
	verbose := flag.Bool("v", false, "print every reference found")
	flag.Parse()
	bad, err := run(*root, *verbose)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docrefs:", err)
		os.Exit(2)
	}
	for _, r := range bad {
		fmt.Fprintf(os.Stderr, "%s: not found\n", r)
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "docrefs: %d references in README.md and docs/ name nothing in the tree\n", len(bad))
		os.Exit(1)
	}
}
