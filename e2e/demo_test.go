// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// klogAlarm matches a klog line of severity warning, error or fatal, and
// the "Unhandled Error" line apimachinery logs for a swallowed error.
var klogAlarm = regexp.MustCompile(`(?m)^[WEF]\d{4} |Unhandled Error|(?i)panic`)

// TestDemoFirstScreen runs the README's first command (make run: the demo)
// as a newcomer sees it, on the runtime under test: no warning or error
// line that is not about them, the exec's output and exit code, and every
// sentence true for the runtime it ran against.
func TestDemoFirstScreen(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kubestream")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/kubestream").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	args := []string{"demo", "--exit"}
	name, ns := "the embedded reference runtime", "default"
	// The embedded runtime speaks v5 itself (cri/streaming); containerd
	// refuses it.
	outcome, route := "("+name+" speaks v5 itself: the session was spliced through unchanged)", "route=direct,subresource=exec: 1"
	if rt.endpoint != "" {
		// The suite's own pod default/demo is there already.
		name, ns = "containerd", "kubestream-demo"
		args = append(args, "--container-runtime-endpoint", rt.endpoint, "--demo-image", testImage(), "--demo-namespace", ns)
		outcome, route = "("+name+" refused v5, as every cri-streaming runtime does", "route=translated,subresource=exec: 1"
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	screen := string(out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, screen)
	}
	if m := klogAlarm.FindString(screen); m != "" {
		t.Errorf("the first screen has an alarming line (%q):\n%s", m, screen)
	}
	for _, want := range []string{
		"container app of pod " + ns + "/demo read: hello over v5.channel.k8s.io",
		"this line is on stderr",
		"command terminated with exit code 3",
		outcome,
		route,
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("the demo did not say %q:\n%s", want, screen)
		}
	}
	if rt.endpoint != "" && strings.Contains(screen, "reference runtime") {
		t.Errorf("against %s the demo speaks of the reference runtime:\n%s", rt.name, screen)
	}
}
