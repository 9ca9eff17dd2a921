// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package sysctls

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSnapshotAndDiff(t *testing.T) {
	root := t.TempDir()
	write := func(rel, v string, mode os.FileMode) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("vm/overcommit_memory", "0\n", 0o644)
	write("kernel/panic", "1\n", 0o644)
	write("kernel/ns_last_pid", "100\n", 0o644) // volatile
	write("fs/file-nr", "1 0 9\n", 0o444)       // a figure, not a setting
	write("net/ipv4/ip_local_port_range", "32768\t60999\n", 0o644)
	write("net/ipv6/conf/docker0/mtu", "1500\n", 0o644) // the interface's
	write("net/ipv6/conf/all/forwarding", "0\n", 0o644)
	before, err := Snapshot(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"vm.overcommit_memory": "0", "kernel.panic": "1", "net.ipv4.ip_local_port_range": "32768 60999", "net.ipv6.conf.all.forwarding": "0"}
	if !reflect.DeepEqual(before, want) {
		t.Fatalf("snapshot %v, want %v", before, want)
	}
	write("vm/overcommit_memory", "1\n", 0o644)
	write("kernel/ns_last_pid", "200\n", 0o644)
	write("net/ipv4/conf/new0/forwarding", "1\n", 0o644) // appeared: not a change
	after, err := Snapshot(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := Diff(before, after); !reflect.DeepEqual(got, []string{"vm.overcommit_memory: 0 -> 1"}) {
		t.Fatalf("diff %q", got)
	}
}

// TestHostSnapshot reads this machine's settings: the kubelet's six are
// among them.
func TestHostSnapshot(t *testing.T) {
	s, err := Snapshot(Root)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops", "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes"} {
		if _, ok := s[k]; !ok {
			t.Errorf("%s missing from the snapshot", k)
		}
	}
}
