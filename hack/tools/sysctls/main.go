// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command sysctls runs a command and fails if the machine's kernel settings
// (/proc/sys) differ after it from before it, naming each that changed:
// the Makefile runs every test stage through it, since the machine is
// shared and the components under test (a kubelet above all) would change
// them.
//
//	sysctls guard -- COMMAND [ARG...]
package main

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/kubestream/kubestream/internal/sysctls"
)

func main() {
	if len(os.Args) < 4 || os.Args[1] != "guard" || os.Args[2] != "--" {
		fmt.Fprintln(os.Stderr, "usage: sysctls guard -- COMMAND [ARG...]")
		os.Exit(2)
	}
	before, err := sysctls.Snapshot(sysctls.Root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sysctls:", err)
		os.Exit(1)
	}
	cmd := exec.Command(os.Args[3], os.Args[4:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	runErr := cmd.Run()
	after, err := sysctls.Snapshot(sysctls.Root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sysctls:", err)
		os.Exit(1)
	}
	code := 0
	if runErr != nil {
		code = 1
		if ee, ok := runErr.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			fmt.Fprintln(os.Stderr, "sysctls:", runErr)
		}
	}
	if changed := sysctls.Diff(before, after); len(changed) > 0 {
		fmt.Fprintf(os.Stderr, "sysctls: %s changed the machine's kernel settings:\n", os.Args[3])
		for _, c := range changed {
			fmt.Fprintln(os.Stderr, "  "+c)
		}
		os.Exit(max(code, 1))
	}
	os.Exit(code)
}
