// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree writes files (path → content) below a new directory and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// writeFile writes content to p below root.
func writeFile(root, p, content string) error {
	return os.WriteFile(filepath.Join(root, filepath.FromSlash(p)), []byte(content), 0o644)
}

func TestRun(t *testing.T) {
	root := tree(t, map[string]string{
		".gitignore":              "/bench/profiles/\n*.test\n",
		"hack/run.sh":             "#!/bin/sh\n",
		"server/limits_unix.go":   "package server\n",
		"server/server_test.go":   "package server\n\nfunc TestServe(t *testing.T) {}\nfunc FuzzClassify(f *testing.F) {}\n",
		"e2e/e2e_test.go":         "package e2e_test\n\nfunc TestDemo(t *testing.T) {}\nfunc BenchmarkExec(b *testing.B) {}\n",
		"cmd/kubestream/serve.go": "package main\n\nfunc f() {\n\tfs.StringVar(&x, \"tls-cert-file\", \"\", \"\")\n\tfs.BoolVarP(&y, \"stdin\", \"i\", false, \"\")\n\tcmd.Flags().DurationVar(&z, \"max-wait\", 0, \"\")\n\tfmt.Println(\"not-a-flag\")\n}\n",
		"config/config.go":        "package config\n\nconst FlagName = \"kubestream-config\"\n",
		"hack/patches/io.patch":   "--- a/internal/io/io_test.go\n+++ b/internal/io/io_test.go\n@@ -1,3 +1,5 @@\n package io\n+func TestStdinStaysOpen(t *testing.T) {}\n",
		"docs/x.md":               "[back](../hack/run.sh) [gone](../hack/gone.sh) [x](x.md)\n",
	})
	doc := strings.Join([]string{
		"See [the server](server/limits_unix.go#L3), [outside](../x.md), [upstream](https://example.com/a/b.go) and [here](#top).", // 1
		"Run `hack/run.sh up` or `./hack/gone.sh`; limits in `server/limits_*.go`, `server/nolimits_*.go`.",                        // 2
		"Tests: `server.TestServe`, TestDemo's case, `e2e.TestServe`, TestGone, FuzzClassify, BenchmarkExec.",                      // 3
		"Flags: `--tls-cert-file`, --stdin, (--max-wait), `--kubestream-config`, `--not-a-flag`, `--privileged`.",                  // 4
		"Output: `_output/table.md`, `bench/profiles/cpu.prof`, containerd's `internal/cri/io/exec_io.go`.",                        // 5
		"The patch's TestStdinStaysOpen, and `io.TestStdinStaysOpen`, `cri/streaming.FuzzGone`.",                                   // 6
		"```go", // 7
		"TestNotHere(t) // another project's code: hack/none.go --none",
		"```",
		"```sh",                             // 10
		"go run ./hack/missing --gone-flag", // 11
		"```",
		"Table rows | `--tls-cert-file` |", // 13
	}, "\n")
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:1: file ../x.md: not found",
		"README.md:2: file hack/gone.sh: not found",
		"README.md:2: file server/nolimits_*.go: not found",
		"README.md:3: test e2e.TestServe: not found",
		"README.md:3: test TestGone: not found",
		"README.md:4: flag not-a-flag: not found",
		"README.md:6: test streaming.FuzzGone: not found",
		"README.md:11: file hack/missing: not found",
		"README.md:11: flag gone-flag: not found",
		"docs/x.md:1: file hack/gone.sh: not found",
	}
	expect(t, root, want)
}

// expect runs the check on root and fails t unless it finds exactly want.
func expect(t *testing.T, root string, want []string) {
	t.Helper()
	bad, err := run(root, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range bad {
		got = append(got, p.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRepository runs the check on this repository itself, as make lint
// does, so that go test ./... fails on a stale doc too.
func TestRepository(t *testing.T) {
	bad, err := run("../../..", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bad {
		t.Error(p)
	}
}
