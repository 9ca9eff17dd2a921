// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

func TestReadingOrders(t *testing.T) {
	root := tree(t, map[string]string{
		// fine/'s order names every file but doc.go and its test: passes.
		"fine/doc.go": "// Package fine is fine.\n//\n// Reading order, each file before the files it uses:\n" +
			"// fine.go (the start; not internal/wire/conn.go),\n// more.go and limits_unix.go.\n//\n// # Goroutines\n//\n// other.go is not in the order.\npackage fine\n",
		"fine/fine.go":        "package fine\n",
		"fine/more.go":        "package fine\n",
		"fine/limits_unix.go": "//go:build unix\n\npackage fine\n",
		"fine/fine_test.go":   "package fine\n",
		// list/'s is a list, as gofmt lays one out: passes.
		"list/doc.go":  "// Package list is a list.\n//\n// Reading order:\n//\n//   - list.go, the start\n//   - more.go\n//\n// other.go is not in the order.\npackage list\n",
		"list/list.go": "package list\n",
		"list/more.go": "package list\n",
		// short/'s leaves out one file and names one it lacks: fails.
		"short/short.go": "// Package short is short.\n//\n// Reading order: short.go, gone.go.\npackage short\n",
		"short/added.go": "package short\n",
		// A paragraph that only mentions an order is none.
		"plain/plain.go": "// Package plain has one file; its reading order is plain.go alone.\npackage plain\n",
		"docs/fine.md": "| [fine/](../fine) | in reading order: [fine.go](../fine/fine.go) → [more.go](../fine/more.go), " +
			"[limits_unix.go](../fine/limits_unix.go), see [wire](../short/short.go) |\n\n" +
			"Its reading order is in [doc.go](../fine/doc.go).\n",
	})
	doc := strings.Join([]string{
		"| where | what |", // 1
		"|---|---|",
		"| [fine/](fine) | its files in reading order: [fine.go](fine/fine.go) → [gone.go](fine/gone.go) |",
		"",
		"The reading order of short/: [short.go](short/short.go) and", // 5
		"[added.go](short/added.go).",
	}, "\n")
	if err := writeFile(root, "README.md", doc); err != nil {
		t.Fatal(err)
	}
	expect(t, root, []string{
		"short/short.go:3: reading order of short/ leaves out added.go; names gone.go, which short/ does not have",
		"README.md:3: file fine/gone.go: not found",
		"README.md:3: reading order of fine/ leaves out limits_unix.go, more.go; names gone.go, which fine/ does not have",
	})
}
