// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"sort"
	"strings"
)

var (
	// goFileRE is a file name in a package comment's reading order.
	goFileRE = regexp.MustCompile(`(?:^|[^\w/.-])(\w+\.go)\b`)
	// orderStart begins a package comment's reading order.
	orderStart = regexp.MustCompile(`^Reading order\b`)
)

// goOrder is a package comment's reading order.
type goOrder struct {
	file  string // the file whose package comment has it
	line  int
	names []string
}

// goReadingOrders returns the tree's packages (directory → non-test .go
// files) and what is wrong with the reading orders their package comments
// give.
func goReadingOrders(root string) (map[string][]string, []problem, error) {
	pkgs := map[string][]string{}
	var orders []goOrder
	fset := token.NewFileSet()
	err := walk(root, func(p string, data []byte) {
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return
		}
		pkgs[path.Dir(p)] = append(pkgs[path.Dir(p)], path.Base(p))
		f, err := parser.ParseFile(fset, p, data, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil || f.Doc == nil {
			return
		}
		if line, text := orderParagraph(fset, f.Doc); text != "" {
			orders = append(orders, goOrder{p, line, goFileNames(text)})
		}
	})
	if err != nil {
		return nil, nil, err
	}
	var bad []problem
	for _, o := range orders {
		if msg := orderDiffers(path.Dir(o.file), o.names, pkgs); msg != "" {
			bad = append(bad, problem{o.file, o.line, msg})
		}
	}
	return pkgs, bad, nil
}

// orderParagraph is the paragraph of a package comment that starts with
// "Reading order", with the lists and indented blocks right under it
// (gofmt sets a list apart by a blank line), and the line it starts on;
// "" when there is none.
func orderParagraph(fset *token.FileSet, doc *ast.CommentGroup) (int, string) {
	var para []string
	start, blank := 0, false
	for _, c := range doc.List {
		for i, raw := range strings.Split(c.Text, "\n") {
			raw = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(raw, "//"), "/*"), "*/")
			l := strings.TrimSpace(raw)
			switch {
			case para == nil && orderStart.MatchString(l):
				start = fset.Position(c.Slash).Line + i
			case para == nil:
				continue
			case l == "":
				blank = true
				continue
			case blank && !strings.HasPrefix(raw, "  ") && !strings.HasPrefix(raw, "\t"):
				return start, strings.Join(para, "\n") // the next paragraph
			}
			para = append(para, l)
		}
	}
	return start, strings.Join(para, "\n")
}

// goFileNames are the file names (server.go, not internal/wire/conn.go) in
// a reading order's text.
func goFileNames(text string) []string {
	var names []string
	for _, m := range goFileRE.FindAllStringSubmatchIndex(text, -1) {
		if end := m[3]; end+1 < len(text) && text[end] == '.' && isWordByte(text[end+1]) {
			continue // server.go.patch
		}
		names = append(names, text[m[2]:m[3]])
	}
	return names
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// mdReadingOrders returns what is wrong with the reading orders doc's
// blocks give: a block that says "reading order" and links .go files.
func mdReadingOrders(doc string, bs []block, pkgs map[string][]string) []problem {
	var bad []problem
	for _, b := range bs {
		if !strings.Contains(strings.ToLower(b.text), "reading order") {
			continue
		}
		var targets []string
		pkg := ""
		for _, m := range linkRE.FindAllStringSubmatch(b.text, -1) {
			if t, ok := linkTarget(doc, m[1]); ok {
				targets = append(targets, t)
				if _, isPkg := pkgs[t]; isPkg && pkg == "" {
					pkg = t
				}
			}
		}
		var names []string
		for _, t := range targets {
			if strings.HasSuffix(t, ".go") {
				if pkg == "" {
					pkg = path.Dir(t)
				}
				if path.Dir(t) == pkg && path.Base(t) != "doc.go" {
					names = append(names, path.Base(t))
				}
			}
		}
		if _, ok := pkgs[pkg]; !ok || len(names) == 0 {
			continue // no order, or only a pointer to doc.go's
		}
		if msg := orderDiffers(pkg, names, pkgs); msg != "" {
			bad = append(bad, problem{doc, b.first, msg})
		}
	}
	return bad
}

// orderDiffers says how names differ from the files of package dir, and
// nothing when they name each of them (doc.go aside) and no other.
func orderDiffers(dir string, names []string, pkgs map[string][]string) string {
	named := map[string]bool{}
	for _, n := range names {
		named[n] = true
	}
	have := map[string]bool{}
	var missing, extra []string
	for _, f := range pkgs[dir] {
		have[f] = true
		if !named[f] && f != "doc.go" {
			missing = append(missing, f)
		}
	}
	for n := range named {
		if !have[n] {
			extra = append(extra, n)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	var msg []string
	if len(missing) > 0 {
		msg = append(msg, "leaves out "+strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		msg = append(msg, "names "+strings.Join(extra, ", ")+", which "+dir+"/ does not have")
	}
	if msg == nil {
		return ""
	}
	return "reading order of " + dir + "/ " + strings.Join(msg, "; ")
}
