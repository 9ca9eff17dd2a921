package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// do runs f on a locked OS thread inside the namespace. The thread goes
// back to its own namespace after; if it cannot, it stays locked, so the
// runtime ends it with the goroutine instead of reusing it elsewhere.
func (ns Namespace) do(f func() error) error {
	if ns.Path == "" {
		return f()
	}
	target, err := os.Open(ns.Path)
	if err != nil {
		return fmt.Errorf("opening network namespace: %w", err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
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
