// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"regexp"
	"strings"
)

var (
	fenceRE    = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")
	shellFence = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true, "text": true}
	// blockStart is a line that begins a block of its own: a heading, a
	// table row, a list item or a quote.
	blockStart = regexp.MustCompile(`^\s*(?:#|\||>|[-*+]\s|\d+[.)]\s)`)
	// sentenceEnd is the end of a sentence inside a block: a full stop,
	// question or exclamation mark before a space or a line's end (not the
	// dots of service.go.patch or v1.36.3).
	sentenceEnd = regexp.MustCompile(`[.!?][*_)"']*(?:\s|$)`)
)

// mdLine is one line of a Markdown document.
type mdLine struct {
	n      int    // its number, from 1
	text   string //
	fenced bool   // inside a fenced code block (not one of its fences)
	lang   string // the fenced block's language, lower case ("" for none)
	fence  bool   // a fenced block's opening or closing line
}

// prose tells whether the line is Markdown text, not code or a fence.
func (l mdLine) prose() bool { return !l.fenced && !l.fence }

// markdownLines splits a document into lines, each knowing whether it is
// inside a fenced code block: a fence opens with ``` or ~~~ and an
// optional language, and closes with the same characters and none.
func markdownLines(text string) []mdLine {
	var out []mdLine
	inFence, lang := "", ""
	for i, line := range strings.Split(text, "\n") {
		l := mdLine{n: i + 1, text: line}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			switch {
			case inFence == "":
				inFence, lang, l.fence = m[1][:3], strings.ToLower(m[2]), true
			case strings.HasPrefix(strings.TrimSpace(line), inFence) && m[2] == "":
				inFence, lang, l.fence = "", "", true
			}
		}
		if !l.fence && inFence != "" {
			l.fenced, l.lang = true, lang
		}
		out = append(out, l)
	}
	return out
}

// block is a run of prose lines read as one: a paragraph, a list item with
// its continuation lines, a table row or a heading.
type block struct {
	text  string // its lines joined by \n
	first int    // the number of its first line
}

// lineAt is the line number of byte offset i of the block's text.
func (b block) lineAt(i int) int { return b.first + strings.Count(b.text[:i], "\n") }

// sentence is the part of the block's text around byte offset i that
// belongs to one sentence: [start, end).
func (b block) sentence(i int) (start, end int) {
	start, end = 0, len(b.text)
	for _, m := range sentenceEnd.FindAllStringIndex(b.text, -1) {
		switch {
		case m[1] <= i:
			start = m[1]
		case m[0] >= i:
			return start, min(end, m[0]+1)
		}
	}
	return start, end
}

// blocks groups a document's prose lines into blocks: a blank line, a
// fence or code ends one, and a heading, table row, list item or quote
// starts a new one.
func blocks(lines []mdLine) []block {
	var out []block
	var cur []string
	first := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, block{strings.Join(cur, "\n"), first})
		}
		cur = nil
	}
	for _, l := range lines {
		if !l.prose() || strings.TrimSpace(l.text) == "" {
			flush()
			continue
		}
		if blockStart.MatchString(l.text) {
			flush()
		}
		if cur == nil {
			first = l.n
		}
		cur = append(cur, l.text)
	}
	flush()
	return out
}
