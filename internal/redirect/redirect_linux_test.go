// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package redirect

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/kubestream/kubestream/internal/nstest"
)

// newNamespace returns a descriptor of a throwaway network namespace
// (nstest.Bound): the rules the tests write never reach the host's.
func newNamespace(t *testing.T) int {
	t.Helper()
	fd, err := unix.Open(nstest.Bound(t), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func tables(t *testing.T, ns int) map[string]*nftables.Table {
	t.Helper()
	conn, err := nftables.New(nftables.WithNetNSFd(ns))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*nftables.Table{}
	for _, tb := range ts {
		m[tb.Name] = tb
	}
	return m
}

func TestInstallAndRemove(t *testing.T) {
	ns := newNamespace(t)
	dir := filepath.Join(t.TempDir(), "run")
	in, err := Install(Rule{From: 10250, To: 10260, Owner: "pod-a", RunDir: dir, NetNS: ns})
	if err != nil {
		t.Fatal(err)
	}
	tb := tables(t, ns)[TablePrefix+"pod-a"]
	if tb == nil {
		t.Fatalf("no table %spod-a after Install", TablePrefix)
	}
	conn, _ := nftables.New(nftables.WithNetNSFd(ns))
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil || len(chains) != 1 || chains[0].Hooknum == nil || *chains[0].Hooknum != *nftables.ChainHookPrerouting || chains[0].Type != nftables.ChainTypeNAT {
		t.Fatalf("chains %+v (%v): want one nat chain at prerouting", chains, err)
	}
	rules, err := conn.GetRules(tb, chains[0])
	if err != nil || len(rules) != 1 {
		t.Fatalf("rules %v (%v)", rules, err)
	}
	if !slices.ContainsFunc(rules[0].Exprs, func(e expr.Any) bool { _, ok := e.(*expr.Redir); return ok }) {
		t.Fatalf("the rule has no redirect: %+v", rules[0].Exprs)
	}
	// A second Install for the same owner while the first lives: refused.
	if _, err := Install(Rule{From: 10250, To: 10260, Owner: "pod-a", RunDir: dir, NetNS: ns}); !errors.Is(err, errHeld) {
		t.Fatalf("a second install of one owner: %v, want its lock held", err)
	}
	if err := in.Remove(); err != nil {
		t.Fatal(err)
	}
	if len(tables(t, ns)) != 0 {
		t.Fatalf("tables left after Remove: %v", tables(t, ns))
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the run directory is left after the last Remove: %v", err)
	}
}

// TestTwoOwnersAndAStaleOne: a rolling update's two processes each keep
// and remove their own table; a table whose process is gone (its lock
// free, as after SIGKILL) is deleted by the next Install.
func TestTwoOwnersAndAStaleOne(t *testing.T) {
	ns := newNamespace(t)
	dir := filepath.Join(t.TempDir(), "run")
	old, err := Install(Rule{From: 10250, To: 10260, Owner: "old", RunDir: dir, NetNS: ns})
	if err != nil {
		t.Fatal(err)
	}
	// A process that died without Remove: its table stays, its lock is free.
	dead, err := Install(Rule{From: 10250, To: 10260, Owner: "dead", RunDir: dir, NetNS: ns})
	if err != nil {
		t.Fatal(err)
	}
	dead.lock.Close()
	newer, err := Install(Rule{From: 10250, To: 10260, Owner: "new", RunDir: dir, NetNS: ns})
	if err != nil {
		t.Fatal(err)
	}
	got := tables(t, ns)
	if got[TablePrefix+"old"] == nil || got[TablePrefix+"new"] == nil || got[TablePrefix+"dead"] != nil {
		t.Fatalf("tables %v: want old's and new's, not dead's", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "dead.lock")); !os.IsNotExist(err) {
		t.Fatalf("the dead process's lock file is left: %v", err)
	}
	if err := old.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := tables(t, ns); len(got) != 1 || got[TablePrefix+"new"] == nil {
		t.Fatalf("tables %v after the old process's Remove: want new's alone", got)
	}
	if err := newer.Remove(); err != nil {
		t.Fatal(err)
	}
	if len(tables(t, ns)) != 0 {
		t.Fatal("tables left")
	}
}

func TestInstallRefusesBadRules(t *testing.T) {
	for _, r := range []Rule{{From: 10250, To: 10250, Owner: "a"}, {From: 0, To: 1, Owner: "a"}, {From: 1, To: 2, Owner: "a b"}, {From: 1, To: 2}} {
		if _, err := Install(r); err == nil {
			t.Errorf("Install(%+v) succeeded", r)
		}
	}
}
