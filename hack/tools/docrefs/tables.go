// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	// delimRow is a table's delimiter row: |---|:--:|, edges optional.
	delimRow = regexp.MustCompile(`^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$`)
	// tableEnd is a line that ends a table's body: another block begins.
	tableEnd = regexp.MustCompile(`^\s*(?:#|>|[-*+]\s|\d+[.)]\s)`)
)

// tables returns the rows of doc's tables whose cell count differs from
// their header's. A table is a prose line with a | over a delimiter row.
func tables(doc string, lines []mdLine) []problem {
	var bad []problem
	for i := 0; i+1 < len(lines); i++ {
		head, delim := lines[i], lines[i+1]
		if !head.prose() || !delim.prose() || !strings.Contains(head.text, "|") ||
			!strings.Contains(delim.text, "|") || !delimRow.MatchString(delim.text) {
			continue
		}
		want := cells(head.text)
		if n := cells(delim.text); n != want {
			bad = append(bad, problem{doc, delim.n, fmt.Sprintf(
				"table's delimiter row has %d cells, its header %d: GitHub renders no table", n, want)})
		}
		j := i + 2
		for ; j < len(lines) && lines[j].prose() && strings.TrimSpace(lines[j].text) != "" &&
			!tableEnd.MatchString(lines[j].text); j++ {
			if n := cells(lines[j].text); n != want {
				bad = append(bad, problem{doc, lines[j].n, fmt.Sprintf(
					"table row has %d cells, its header %d%s", n, want, pipeHint(lines[j].text))})
			}
		}
		i = j - 1
	}
	return bad
}

// cellSeps are the offsets of the | that separate a row's cells, escaped
// ones (\|) left out. GitHub splits a row before it reads code spans, so a
// | inside backticks separates cells too.
func cellSeps(row string) []int {
	var seps []int
	for i := 0; i < len(row); i++ {
		switch row[i] {
		case '\\':
			i++ // \| and \\ are text
		case '|':
			seps = append(seps, i)
		}
	}
	return seps
}

// cells is the number of cells in a table row: one more than its
// separators, less a leading and a trailing one, which are its edges.
func cells(row string) int {
	row = strings.TrimSpace(row)
	seps := cellSeps(row)
	n := len(seps) + 1
	if len(seps) > 0 && seps[0] == 0 {
		n--
	}
	if len(seps) > 0 && seps[len(seps)-1] == len(row)-1 && len(row) > 1 {
		n--
	}
	return n
}

// pipeHint says why a row has more cells than meant when one of its
// separators is inside a code span, and nothing otherwise.
func pipeHint(row string) string {
	seps := cellSeps(row)
	for _, span := range codeSpans(row) {
		for _, s := range seps {
			if s > span[0] && s < span[1] {
				return fmt.Sprintf(" (the | in %s splits it: write \\| there)", row[span[0]:span[1]])
			}
		}
	}
	return ""
}

// codeSpans are the [start, end) offsets of a line's code spans: a run of
// backticks to the next run of as many.
func codeSpans(s string) [][2]int {
	var spans [][2]int
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(s) && s[i+n] == '`' {
			n++
		}
		tick := strings.Repeat("`", n)
		end := strings.Index(s[i+n:], tick)
		if end < 0 {
			i += n
			continue
		}
		spans = append(spans, [2]int{i, i + n + end + n})
		i += n + end + n
	}
	return spans
}
