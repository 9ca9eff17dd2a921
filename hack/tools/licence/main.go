// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command licence fails when a Go file of the repository does not begin
// with the licence header that LICENSE calls for, and with -fix writes the
// header into each file that has none. make lint runs it (and so make
// test).
//
// LICENSE is the Apache License 2.0, so the header is its SPDX identifier
// under a copyright line:
//
//	// Copyright 2026 The kubestream Authors.
//	// SPDX-License-Identifier: Apache-2.0
//
// then a blank line, which keeps it out of the package's doc comment. The
// year is the file's first (any year passes); -fix writes this year's. A
// //go:build line may follow it: Go reads build constraints below other
// line comments.
//
// The files are every .go file below the root but:
//
//   - those in a hidden directory (.git), a directory whose name starts
//     with _ (_output; hack/kube/_kubernetes, the Kubernetes source
//     hack/kube.sh fetches), testdata, vendor, bin or node_modules;
//   - symbolic links (hack/kube/kubelet-VERSION/main.go is
//     hack/kube/kubelet/main.go, which is checked);
//   - generated files (a "// Code generated … DO NOT EDIT." line): their
//     generator writes them whole.
//
// -fix also puts the blank line under a header that lacks it. A file that
// begins with some other copyright line is reported and left for a person
// to fix.
//
// Usage: go run ./hack/tools/licence [-root DIR] [-fix]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// licences are the SPDX identifiers of the licences the tool knows, each
// with phrases of its text that LICENSE must contain.
var licences = []struct {
	id      string
	phrases []string
}{
	{"Apache-2.0", []string{"Apache License", "Version 2.0"}},
}

var generatedRE = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// spdx is the SPDX identifier of root's LICENSE.
func spdx(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		return "", err
	}
	for _, l := range licences {
		ok := true
		for _, p := range l.phrases {
			ok = ok && bytes.Contains(data, []byte(p))
		}
		if ok {
			return l.id, nil
		}
	}
	return "", errors.New("LICENSE is none of the licences this tool knows: teach it LICENSE's header")
}

// header is the licence header with the year.
func header(id string, year int) string {
	return fmt.Sprintf("// Copyright %d The kubestream Authors.\n// SPDX-License-Identifier: %s\n\n", year, id)
}

// headerRE matches the header's two lines with any year, at the start of
// a file.
func headerRE(id string) *regexp.Regexp {
	return regexp.MustCompile(`^// Copyright \d{4} The kubestream Authors\.\n// SPDX-License-Identifier: ` +
		regexp.QuoteMeta(id) + `\n`)
}

// check says what is wrong with a file's header (want, from headerRE),
// "" when nothing, and what -fix makes of the file, nil when it may not
// fix it: year's header added, or a blank line under the header.
func check(data []byte, want *regexp.Regexp, id string, year int) (string, []byte) {
	m := want.FindIndex(data)
	switch {
	case m != nil && (m[1] == len(data) || data[m[1]] == '\n'):
		return "", nil
	case m != nil:
		fixed := append(append(append([]byte{}, data[:m[1]]...), '\n'), data[m[1]:]...)
		return "has no blank line under its licence header, which so joins the package's doc comment", fixed
	case bytes.HasPrefix(data, []byte("// Copyright")):
		return "begins with a copyright line that is not the header's (// Copyright YEAR The kubestream Authors., then // SPDX-License-Identifier: " + id + "): fix it by hand", nil
	}
	return "has no licence header", append([]byte(header(id, year)), data...)
}

// goFiles are the .go files below root that need the header, relative to
// root, with their contents.
func goFiles(root string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "vendor" || name == "bin" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || !d.Type().IsRegular() { // a symbolic link is checked at its target
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if generatedRE.Match(data) {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = data
		return nil
	})
	return files, err
}

// run checks the files below root; with fix it writes the header, dated
// year, into each that has none, and returns what it fixed and what is
// still wrong.
func run(root string, fix bool, year int) (fixed, bad []string, err error) {
	id, err := spdx(root)
	if err != nil {
		return nil, nil, err
	}
	files, err := goFiles(root)
	if err != nil {
		return nil, nil, err
	}
	want := headerRE(id)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		msg, fixedData := check(files[p], want, id, year)
		if msg == "" {
			continue
		}
		if !fix || fixedData == nil {
			bad = append(bad, p+": "+msg)
			continue
		}
		full := filepath.Join(root, filepath.FromSlash(p))
		info, err := os.Stat(full)
		if err != nil {
			return fixed, bad, err
		}
		if err := os.WriteFile(full, fixedData, info.Mode().Perm()); err != nil {
			return fixed, bad, err
		}
		fixed = append(fixed, p)
	}
	return fixed, bad, nil
}

func main() {
	root := flag.String("root", ".", "the repository's root")
	fix := flag.Bool("fix", false, "write the header into each Go file that has none (printing its path)")
	flag.Parse()
	fixed, bad, err := run(*root, *fix, time.Now().Year())
	for _, p := range fixed {
		fmt.Println(p)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "licence:", err)
		os.Exit(2)
	}
	for _, b := range bad {
		fmt.Fprintln(os.Stderr, b)
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "licence: %d Go file(s) without the licence header LICENSE calls for (go run ./hack/tools/licence -fix writes it)\n", len(bad))
		os.Exit(1)
	}
}
