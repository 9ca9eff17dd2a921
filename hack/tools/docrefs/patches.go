// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var (
	figureRE    = regexp.MustCompile(`\+(\d+)\s*/\s*[−–-](\d+)`)
	patchNameRE = regexp.MustCompile(`[\w./-]*\w\.patch\b`)
	hunkRE      = regexp.MustCompile(`^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@`)
)

// patchSize is what a patch adds and removes, and how much of it is in
// its _test.go files.
type patchSize struct{ added, removed, testAdded, testRemoved int }

// patchSizes are the sizes of the tree's .patch files by path.
func patchSizes(root string) (map[string]patchSize, error) {
	sizes := map[string]patchSize{}
	err := walk(root, func(p string, data []byte) {
		if strings.HasSuffix(p, ".patch") {
			sizes[p] = countPatch(string(data))
		}
	})
	return sizes, err
}

// countPatch counts a unified diff's added and removed lines, hunk by
// hunk as the hunks' headers size them, so that a header (--- a/x, +++
// b/x) or a mail's signature is never taken for a line, nor a removed
// line that begins "--" for a header.
func countPatch(text string) patchSize {
	var s patchSize
	test := false
	oldLeft, newLeft := 0, 0
	for _, l := range strings.Split(text, "\n") {
		if oldLeft <= 0 && newLeft <= 0 {
			if name, ok := strings.CutPrefix(l, "+++ "); ok {
				name, _, _ = strings.Cut(name, "\t")
				test = strings.HasSuffix(strings.TrimSpace(name), "_test.go")
			} else if m := hunkRE.FindStringSubmatch(l); m != nil {
				oldLeft, newLeft = hunkLen(m[1]), hunkLen(m[2])
			}
			continue
		}
		switch {
		case strings.HasPrefix(l, "+"):
			s.added, newLeft = s.added+1, newLeft-1
			if test {
				s.testAdded++
			}
		case strings.HasPrefix(l, "-"):
			s.removed, oldLeft = s.removed+1, oldLeft-1
			if test {
				s.testRemoved++
			}
		case strings.HasPrefix(l, `\`): // \ No newline at end of file
		default: // context, its leading space perhaps trimmed
			oldLeft, newLeft = oldLeft-1, newLeft-1
		}
	}
	return s
}

// hunkLen is a hunk header's line count: 1 when it leaves it out.
func hunkLen(s string) int {
	if s == "" {
		return 1
	}
	n, _ := strconv.Atoi(s)
	return n
}

// patchFigures returns the patch sizes in doc's blocks that differ from
// their patch's, or that name no patch.
func patchFigures(doc string, bs []block, sizes map[string]patchSize) []problem {
	var bad []problem
	for _, b := range bs {
		for _, m := range figureRE.FindAllStringSubmatchIndex(b.text, -1) {
			fig, line := b.text[m[0]:m[1]], b.lineAt(m[0])
			start, end := b.sentence(m[0])
			name := nearestPatch(b.text[start:end], m[0]-start)
			if name == "" {
				bad = append(bad, problem{doc, line, "patch size " + fig + " names no .patch file in its sentence"})
				continue
			}
			p, msg := resolvePatch(doc, name, sizes)
			if msg != "" {
				bad = append(bad, problem{doc, line, "patch size " + fig + ": " + msg})
				continue
			}
			added, _ := strconv.Atoi(b.text[m[2]:m[3]])
			removed, _ := strconv.Atoi(b.text[m[4]:m[5]])
			if msg := sizeDiffers(sizes[p], added, removed); msg != "" {
				bad = append(bad, problem{doc, line, fmt.Sprintf("patch size %s for %s, %s", fig, p, msg)})
			}
		}
	}
	return bad
}

// sizeDiffers says what s is when +added/−removed is neither the whole
// patch's size nor its size without its tests, and nothing when it is one.
func sizeDiffers(s patchSize, added, removed int) string {
	if added == s.added && removed == s.removed {
		return ""
	}
	msg := fmt.Sprintf("which is +%d/−%d", s.added, s.removed)
	if s.testAdded+s.testRemoved > 0 {
		na, nr := s.added-s.testAdded, s.removed-s.testRemoved
		if added == na && removed == nr {
			return ""
		}
		msg += fmt.Sprintf(" (+%d/−%d without its _test.go files)", na, nr)
	}
	return msg
}

// nearestPatch is the .patch name of sentence nearest before offset at,
// else nearest after it, else "".
func nearestPatch(sentence string, at int) string {
	name := ""
	for _, m := range patchNameRE.FindAllStringIndex(sentence, -1) {
		if m[1] <= at {
			name = sentence[m[0]:m[1]]
		} else if m[0] >= at && name == "" {
			return sentence[m[0]:m[1]]
		}
	}
	return name
}

// resolvePatch is the tree's patch that name, in doc, means: the path from
// the root, from doc's directory, or the one patch whose path ends in it;
// or, with "", what is wrong with the name.
func resolvePatch(doc, name string, sizes map[string]patchSize) (string, string) {
	for _, p := range []string{path.Clean(name), path.Join(path.Dir(doc), name)} {
		if _, ok := sizes[p]; ok {
			return p, ""
		}
	}
	var tails []string
	for p := range sizes {
		if !strings.HasPrefix(name, "../") && strings.HasSuffix(p, "/"+strings.TrimPrefix(name, "./")) {
			tails = append(tails, p)
		}
	}
	sort.Strings(tails)
	switch len(tails) {
	case 1:
		return tails[0], ""
	case 0:
		return "", "the tree has no patch " + name
	}
	return "", name + " could be any of " + strings.Join(tails, ", ") + ": name it by its path"
}
