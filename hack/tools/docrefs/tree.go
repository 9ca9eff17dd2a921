// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
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

// docs are README.md, docs/*.md and the README.md of each top-level
// directory (manifests/README.md), relative to root.
func docs(root string) []string {
	out := []string{"README.md"}
	for _, glob := range []string{"docs/*.md", "*/README.md"} {
		m, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(glob)))
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
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
