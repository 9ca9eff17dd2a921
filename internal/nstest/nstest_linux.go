// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package nstest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// Bound creates a network namespace with its loopback up, bind-mounted on
// a file in t's temporary directory (unmounted when t ends), and returns
// the file's path. It skips t unless it runs as root (make test does, here
// and in CI).
func Bound(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	path := filepath.Join(t.TempDir(), "net")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		if err := loopbackUp(); err != nil {
			errc <- err
			return
		}
		errc <- unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, "")
	}()
	if err := <-errc; err != nil {
		t.Fatalf("creating a network namespace as root: %v", err) // root can: a failure is the test's
	}
	t.Cleanup(func() {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test namespace: %v", err)
		}
	})
	return path
}

// Do runs f on a thread moved into the namespace at path; the thread is
// thrown away after, never returned to the scheduler's pool.
func Do(t testing.TB, path string, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread stays in the namespace
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err == nil {
			f()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// loopbackUp sets lo up in the calling thread's namespace (ioctl, not /proc/sys).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
