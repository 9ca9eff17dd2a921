// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package redirect

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TablePrefix begins the name of every table this package writes.
const TablePrefix = "kubestream_"

// Rule is a redirect to install.
type Rule struct {
	// From is the kubelet's port, To kubestream's.
	From, To uint16
	// Owner names this process's table and lock file (a pod UID): letters,
	// digits, '-' and '_'.
	Owner string
	// RunDir holds the lock files: a directory on the host, shared by
	// every kubestream that may redirect on the node.
	RunDir string
	// NetNS, when not 0, is a network namespace's descriptor to write in
	// (tests); 0 is the calling process's.
	NetNS int
}

// Installed is a redirect in place, until Remove.
type Installed struct {
	rule  Rule
	table *nftables.Table
	lock  *os.File
}

// Install takes this process's lock, deletes the tables of kubestream
// processes that are gone, and adds this process's redirect.
func Install(r Rule) (*Installed, error) {
	if r.From == 0 || r.To == 0 || r.From == r.To {
		return nil, fmt.Errorf("redirect: ports %d to %d", r.From, r.To)
	}
	if r.Owner == "" || strings.Trim(r.Owner, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		return nil, fmt.Errorf("redirect: owner %q: want letters, digits, '-' and '_'", r.Owner)
	}
	if err := os.MkdirAll(r.RunDir, 0o755); err != nil {
		return nil, fmt.Errorf("redirect: %w", err)
	}
	lock, err := takeLock(filepath.Join(r.RunDir, r.Owner+".lock"))
	if err != nil {
		return nil, err
	}
	conn, err := nftables.New(nftables.WithNetNSFd(r.NetNS))
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("redirect: netlink: %w", err)
	}
	in := &Installed{rule: r, lock: lock, table: &nftables.Table{Family: nftables.TableFamilyINet, Name: TablePrefix + r.Owner}}
	if err := sweep(conn, r.RunDir, in.table.Name); err != nil {
		in.release()
		return nil, err
	}
	add(conn, in.table, r.From, r.To)
	if err := conn.Flush(); err != nil {
		in.release()
		return nil, fmt.Errorf("redirect: adding table %s: %w", in.table.Name, err)
	}
	return in, nil
}

// add queues the table, its chain and its one rule: tcp dport from, to an
// address of this host, redirected to port to.
func add(conn *nftables.Conn, t *nftables.Table, from, to uint16) {
	conn.AddTable(t)
	c := conn.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	conn.AddRule(&nftables.Rule{Table: t, Chain: c, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(from)},
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(to)},
		&expr.Redir{RegisterProtoMin: 1},
	}})
}

// sweep deletes every kubestream table but own whose lock file no
// process holds (or that has none).
func sweep(conn *nftables.Conn, runDir, own string) error {
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("redirect: listing tables: %w", err)
	}
	var stale []string
	for _, t := range tables {
		if !strings.HasPrefix(t.Name, TablePrefix) || t.Name == own {
			continue
		}
		path := filepath.Join(runDir, strings.TrimPrefix(t.Name, TablePrefix)+".lock")
		l, err := takeLock(path)
		if errors.Is(err, errHeld) {
			continue // its process lives: a rolling update's other pod
		}
		conn.DelTable(t)
		stale = append(stale, path)
		if l != nil {
			l.Close()
		}
	}
	if len(stale) == 0 {
		return nil
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("redirect: deleting the tables of kubestream processes that are gone: %w", err)
	}
	for _, p := range stale {
		_ = os.Remove(p)
	}
	return nil
}

var errHeld = errors.New("lock held")

// takeLock opens path and takes its lock, or fails with errHeld.
func takeLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("redirect: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("redirect: %s: %w", path, errHeld)
		}
		return nil, fmt.Errorf("redirect: locking %s: %w", path, err)
	}
	return f, nil
}

// Remove deletes this process's table, then its lock file, then the run
// directory if no other lock is left in it.
func (in *Installed) Remove() error {
	conn, err := nftables.New(nftables.WithNetNSFd(in.rule.NetNS))
	if err != nil {
		return fmt.Errorf("redirect: netlink: %w", err)
	}
	conn.DelTable(in.table)
	if err := conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("redirect: deleting table %s: %w", in.table.Name, err)
	}
	in.release()
	return nil
}

func (in *Installed) release() {
	_ = os.Remove(in.lock.Name())
	in.lock.Close()
	_ = os.Remove(in.rule.RunDir) // only if empty: another process's lock keeps it
}
