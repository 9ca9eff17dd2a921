// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

func TestCells(t *testing.T) {
	for row, want := range map[string]int{
		"| a | b | c |":        3,
		"a | b":                2,
		"|---|:-:|--:|":        3,
		"| `a\\|b` | c\\|d |":  2, // escaped, in a code span and out
		"| `a|b` | c |":        3, // GitHub splits inside a code span too
		"|":                    1,
		"| trailing \\\\| x |": 2, // \\ is an escaped backslash: the | splits
	} {
		if got := cells(row); got != want {
			t.Errorf("cells(%q) = %d, want %d", row, got, want)
		}
	}
}

func TestTables(t *testing.T) {
	root := tree(t, map[string]string{"docs/fine.md": strings.Join([]string{
		"| route | `a\\|b` |", // a table whose rows all agree: passes
		"|---|---|",
		"| direct | `x` |",
		"",
		"| one |",
		"| --- |",
		"| two |",
	}, "\n")})
	doc := strings.Join([]string{
		"| a | b | c | d |", // 1
		"|---|---|---|---|---|",
		"| 1 | 2 | 3 | 4 |",
		"",
		"| a | b |", // 5
		"|:--|--:|",
		"| 1 | 2 |",
		"| 1 | `x|y` |",
		"| 1 |",
		"text under the table, a row of one cell", // 10
		"## heading ends it",
		"",
		"```md",
		"| a | b |",
		"|---|",
		"```",
		"a | b", // 17: no leading pipes
		"--|--|--",
		"",
	}, "\n")
	if err := writeFile(root, "README.md", doc); err != nil {
		t.Fatal(err)
	}
	expect(t, root, []string{
		"README.md:2: table's delimiter row has 5 cells, its header 4: GitHub renders no table",
		"README.md:8: table row has 3 cells, its header 2 (the | in `x|y` splits it: write \\| there)",
		"README.md:9: table row has 1 cells, its header 2",
		"README.md:10: table row has 1 cells, its header 2",
		"README.md:18: table's delimiter row has 3 cells, its header 2: GitHub renders no table",
	})
}
