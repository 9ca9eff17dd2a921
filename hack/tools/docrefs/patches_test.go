// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// twoFiles is a patch of a file and its test: +3/−2 in all, +2/−2 without
// the test; its removed line "-- x" is a line, not a header.
const twoFiles = `--- a/server/server.go
+++ b/server/server.go
@@ -1,4 +1,4 @@
 package server
--- old comment
+// new comment
-old()
+new()
 end
--- a/server/server_test.go
+++ b/server/server_test.go
@@ -0,0 +1 @@
+func TestNew(t *testing.T) {}
\ No newline at end of file
-- 
2.45.0
`

func TestCountPatch(t *testing.T) {
	want := patchSize{added: 3, removed: 2, testAdded: 1}
	if got := countPatch(twoFiles); got != want {
		t.Errorf("countPatch = %+v, want %+v", got, want)
	}
}

func TestPatchFigures(t *testing.T) {
	root := tree(t, map[string]string{
		"hack/crio/exec.patch":        twoFiles,
		"hack/crio/server.go.patch":   twoFiles,
		"hack/kube/server.go.patch":   twoFiles,
		"hack/containerd/other.patch": "--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n x\n+y\n",
		// Each size here is its patch's: passes.
		"docs/fine.md": strings.Join([]string{
			"The patch ([hack/crio/exec.patch](../hack/crio/exec.patch),",
			"+3/−2 with its test) and `other.patch` (+1/-0).",
			"Without the test: `hack/crio/server.go.patch` (+2/−2 in one file).",
			"- (**+1/–0**) is what other.patch adds.",
		}, "\n"),
	})
	doc := strings.Join([]string{
		"CRI-O's (`hack/crio/exec.patch`, +29/−2) and containerd's (`other.patch`, +1/−1) differ.", // 1
		"A figure alone, +1/−0. Its patch in the next sentence: other.patch.",                      // 2
		"`server.go.patch` (+3/−2) could be either.",                                               // 3
		"`gone.patch`, +1/−0.",               // 4
		"| `hack/crio/exec.patch` | +3/−1 |", // 5
		"| `hack/crio/exec.patch` | +3/−2 |", // 6
		"",
		"```sh",
		"git apply other.patch # +9/-9 in a fence is not read",
		"```",
	}, "\n")
	if err := writeFile(root, "README.md", doc); err != nil {
		t.Fatal(err)
	}
	expect(t, root, []string{
		"README.md:1: patch size +29/−2 for hack/crio/exec.patch, which is +3/−2 (+2/−2 without its _test.go files)",
		"README.md:1: patch size +1/−1 for hack/containerd/other.patch, which is +1/−0",
		"README.md:2: patch size +1/−0 names no .patch file in its sentence",
		"README.md:3: patch size +3/−2: server.go.patch could be any of hack/crio/server.go.patch, hack/kube/server.go.patch: name it by its path",
		"README.md:4: patch size +1/−0: the tree has no patch gone.patch",
		"README.md:5: patch size +3/−1 for hack/crio/exec.patch, which is +3/−2 (+2/−2 without its _test.go files)",
	})
}
