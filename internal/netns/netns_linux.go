// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// homeNS is where a thread finds its own namespace to go back to (a
// variable so that a test can make the way back fail).
var homeNS = "/proc/thread-self/ns/net"

// do runs f on a locked OS thread inside the namespace. The thread goes
// back to its own namespace after; if it cannot, it stays locked, so the
// runtime ends it with the goroutine instead of reusing it elsewhere.
func (ns Namespace) do(f func() error) error {
	if ns.Path == "" {
		return f()
	}
	target := ns.f
	if target == nil {
		var err error
		if target, err = os.Open(ns.Path); err != nil {
			return fmt.Errorf("opening network namespace: %w", err)
		}
		defer target.Close()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(homeNS)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("opening this thread's network namespace: %w", err)
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering network namespace %s: %w", ns.Path, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leaving network namespace %s: %w", ns.Path, err)) // the thread stays locked and dies
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// unprivilegedPortStart reads the setting of the calling thread's network
// namespace (/proc/sys/net is the opener's).
func unprivilegedPortStart() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
