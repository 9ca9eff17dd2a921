// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command runc-fit runs runc with the container's or the exec's process
// spec fitted to what this node can grant, as containerd does on its own:
// a negative oom_score_adj raised to 0 (containerd's
// restrict_oom_score_adj: this Docker engine's host refuses negative
// scores, and CRI-O, which has no such setting, asks -998 for every pod's
// infra container), and the capabilities outside the node's own bounding
// set dropped (containerd grants a privileged container the capabilities
// it has; CRI-O grants every one it knows, and runc then fails with
// "unable to apply caps" where the engine withholds CAP_SYS_RESOURCE).
// CRI-O names it as its runtime's path in the kind node and the hermetic
// CRI-O (hack/crio.sh); every argument goes to runc unchanged.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// runc is the binary run in the end (Debian's package).
const runc = "/usr/sbin/runc"

func main() {
	if spec := specFile(os.Args[1:]); spec != "" {
		if err := fit(spec); err != nil {
			fmt.Fprintf(os.Stderr, "runc-fit: %v\n", err)
			os.Exit(1)
		}
	}
	err := syscall.Exec(runc, append([]string{runc}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "runc-fit: exec %s: %v\n", runc, err)
	os.Exit(1)
}

// specFile returns the process spec a runc command line will read: the
// bundle's config.json for create and run, the --process file for exec.
func specFile(args []string) string {
	var cmd, bundle, process string
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() string {
			if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "-") {
				return v
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--bundle" || a == "-b" || strings.HasPrefix(a, "--bundle="):
			bundle = value()
		case a == "--process" || a == "-p" || strings.HasPrefix(a, "--process="):
			process = value()
		case a == "--root" || a == "--log" || a == "--log-format" || a == "--criu" || a == "--pid-file" ||
			a == "--console-socket" || a == "--preserve-fds":
			value()
		case cmd == "" && !strings.HasPrefix(a, "-"):
			cmd = a
		}
	}
	switch {
	case cmd == "exec" && process != "":
		return process
	case cmd == "create" || cmd == "run":
		if bundle == "" {
			bundle = "."
		}
		return filepath.Join(bundle, "config.json")
	}
	return ""
}

// fit rewrites file (a runtime spec, or an exec's process spec) with its
// process's oomScoreAdj raised to 0 if negative and its capabilities cut to
// the node's bounding set, when either needs it.
func fit(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	proc := spec
	if p, ok := spec["process"].(map[string]any); ok {
		proc = p
	}
	changed := false
	if adj, ok := proc["oomScoreAdj"].(float64); ok && adj < 0 {
		proc["oomScoreAdj"] = 0
		changed = true
	}
	if caps, ok := proc["capabilities"].(map[string]any); ok {
		bounding, err := boundingSet()
		if err != nil {
			return err
		}
		for set, list := range caps {
			names, _ := list.([]any)
			kept := slices.DeleteFunc(slices.Clone(names), func(n any) bool {
				s, _ := n.(string)
				i := slices.Index(capNames, strings.TrimPrefix(s, "CAP_"))
				return i >= 0 && bounding&(1<<i) == 0
			})
			if len(kept) != len(names) {
				caps[set] = kept
				changed = true
			}
		}
	}
	if !changed {
		return nil
	}
	if data, err = json.Marshal(spec); err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o600)
}

// boundingSet is this process's capability bounding set, which a
// container started from here cannot exceed.
func boundingSet() (uint64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no CapBnd in /proc/self/status")
}

// capNames are the capabilities by number (linux/capability.h).
var capNames = []string{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
	"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
	"MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
	"CHECKPOINT_RESTORE"}
