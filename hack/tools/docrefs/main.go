// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command docrefs fails when README.md, docs/*.md or a top-level
// directory's README.md (manifests/) say of the repository what the
// repository does not bear out, so that the docs cannot drift from the
// code unseen. make lint runs it (and so make test). It checks four
// things.
//
// References (refs.go). What it reads as a reference, outside fenced code
// blocks in a language other than a shell's (those show another project's
// code: a kubelet's Go, containerd's, a configuration file):
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
//     registers it, or it is another tool's flag in otherFlags.
//
// Tables (tables.go): a table's header, delimiter row and body rows must
// have as many cells each, counted as GitHub splits a row: at every | but
// an escaped \|, inside a code span too (`a|b` is two cells there: write
// `a\|b`), the row's leading and trailing | being its edges. A header and
// delimiter row that disagree make no table at all; a body row that does
// loses cells or gains empty ones. The body runs to a blank line or the
// next heading, list, quote or fence (a paragraph line right under a table
// is a row of one cell).
//
// Patch sizes (patches.go): a figure +N/−M (with −, – or -) is the size of
// the patch named nearest before it in the same sentence, else nearest
// after it: a word or link target ending in .patch. A sentence ends at a
// . ! or ? before a space or a line's end, and at its block's end (a
// blank line; a heading, table row, list item or quote begins a block). A
// name resolves as a path from the root, then from the document, then as
// the tail of exactly one .patch file of the tree (service.go.patch). N
// and M must be the lines the patch adds and removes, counted in its hunks
// (not its ---/+++ headers): the whole patch's, or the patch's without its
// _test.go files (a doc that says "+19/−5 in two files, and a test file").
// A figure with no patch in its sentence, or whose name resolves to no
// patch or to several, fails too.
//
// Reading orders (readingorder.go): a package comment's paragraph that
// starts with "Reading order" (and a list right under it) names the
// package's files as words (server.go), and a block of a doc (a paragraph, a table row) that says
// "reading order" names them as links ([server.go](server/server.go)),
// the package being the first directory the block links ([server/](server))
// or else the first linked .go file's. Either must name every non-test .go
// file of the package, whatever its build constraints, and no other;
// doc.go may be left out. A block that links no .go file of the package
// but doc.go only points to an order and is not checked.
//
// Usage: go run ./hack/tools/docrefs [-root DIR] [-v]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// problem is one thing a doc says that the tree does not bear out.
type problem struct {
	doc  string // the file saying it, relative to the root
	line int
	msg  string
}

func (p problem) String() string { return fmt.Sprintf("%s:%d: %s", p.doc, p.line, p.msg) }

// run checks every doc against the tree below root, verbose printing each
// reference found.
func run(root string, verbose bool) ([]problem, error) {
	testNames, err := tests(root)
	if err != nil {
		return nil, err
	}
	flagNames, err := flags(root)
	if err != nil {
		return nil, err
	}
	patches, err := patchSizes(root)
	if err != nil {
		return nil, err
	}
	pkgs, bad, err := goReadingOrders(root)
	if err != nil {
		return nil, err
	}
	tops, ignored := topLevel(root), gitignored(root)
	for _, doc := range docs(root) {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			return nil, err
		}
		lines := markdownLines(string(data))
		refs := scan(doc, lines, tops)
		if verbose {
			for _, r := range refs {
				fmt.Println(r)
			}
		}
		for _, r := range check(root, refs, testNames, flagNames, ignored) {
			bad = append(bad, problem{r.doc, r.line, r.kind + " " + r.name + ": not found"})
		}
		bs := blocks(lines)
		bad = append(bad, tables(doc, lines)...)
		bad = append(bad, patchFigures(doc, bs, patches)...)
		bad = append(bad, mdReadingOrders(doc, bs, pkgs)...)
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
	for _, p := range bad {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "docrefs: the docs say %d thing(s) the tree does not bear out\n", len(bad))
		os.Exit(1)
	}
}
