// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sysctls reads the machine's kernel settings (/proc/sys), so that
// a test can show it left them as it found them: the node tests run a
// kubelet (which writes six of them when they differ from what it wants),
// containerd, runc and kind's nodes on a machine they share.
package sysctls

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Root is where the kernel's settings are.
const Root = "/proc/sys"

// Snapshot maps each readable, writable setting under root (a key like
// "vm.overcommit_memory") to its value. Read-only entries are the kernel's
// figures, not settings, and a few writable ones change on their own
// (volatile); neither is kept. Entries that cannot be read are skipped.
func Snapshot(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil // a directory this process may not read
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm()&0o200 == 0 {
			return nil
		}
		rel := strings.TrimPrefix(path, root+"/")
		if volatile[rel] || perInterface(rel) {
			return nil
		}
		key := strings.ReplaceAll(rel, "/", ".")
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // write-only (vm.drop_caches) or refused
		}
		out[key] = strings.Join(strings.Fields(string(b)), " ")
		return nil
	})
	return out, err
}

// volatile are writable entries the kernel moves by itself.
var volatile = map[string]bool{
	"kernel/ns_last_pid": true, // the last PID handed out
	"kernel/tainted":     true, // set by the kernel on a warning or module load
	// lowered by the kernel when perf's sampling interrupts take too long
	// (make bench-node runs perf)
	"kernel/perf_event_max_sample_rate": true,
	"kernel/perf_cpu_time_max_percent":  true,
}

// perInterface reports whether rel is one network interface's entry
// (net/ipv4/conf/eth0/..., net/ipv6/neigh/eth0/...): they follow the
// interface (a bridge's MTU moves when a container's link joins it), and
// the machine-wide settings are the "all" and "default" entries beside
// them.
func perInterface(rel string) bool {
	f := strings.Split(rel, "/")
	return len(f) > 4 && f[0] == "net" && (f[2] == "conf" || f[2] == "neigh") && f[3] != "all" && f[3] != "default"
}

// Diff lists the keys present in both snapshots whose values differ, as
// "key: before -> after", sorted. A key in one snapshot only (an interface
// that came or went) is not a change of a setting.
func Diff(before, after map[string]string) []string {
	var out []string
	for k, b := range before {
		if a, ok := after[k]; ok && a != b {
			out = append(out, fmt.Sprintf("%s: %s -> %s", k, b, a))
		}
	}
	sort.Strings(out)
	return out
}
