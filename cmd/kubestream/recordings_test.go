// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"strings"
	"testing"
)

// TestReplayUnfinished: a recording still being written ends in zeros on
// disk; replay plays what is there and says it is unfinished.
func TestReplayUnfinished(t *testing.T) {
	cast := `{"version": 2, "width": 80, "height": 24}` + "\n" +
		`[0.1, "o", "one\r\n"]` + "\n" + `[0.2, "o", "two\r\n"]` + "\n" + strings.Repeat("\x00", 4000)
	var out strings.Builder
	err := replay(strings.NewReader(cast), &out, 100, 0)
	if !errors.Is(err, errUnfinished) {
		t.Errorf("replay: %v, want %v", err, errUnfinished)
	}
	if out.String() != "one\r\ntwo\r\n" {
		t.Errorf("played %q", out.String())
	}
	out.Reset()
	if err := replay(strings.NewReader(cast[:strings.IndexByte(cast, 0)]), &out, 100, 0); err != nil || out.String() != "one\r\ntwo\r\n" {
		t.Errorf("a whole recording: %v, played %q", err, out.String())
	}
}
