// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package connreset

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestOf(t *testing.T) {
	opErr := func(op string, errno syscall.Errno) error {
		return &net.OpError{Op: op, Net: "tcp4", Err: os.NewSyscallError(op, errno)}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		// containerd 2.x wraps with %w.
		{fmt.Errorf("failed to execute portforward for %q port %d: %w", "abc", 9000, opErr("read", syscall.ECONNRESET)), Reset},
		{fmt.Errorf("copying from port 9000: %w", opErr("write", syscall.EPIPE)), BrokenPipe},
		// A runtime that formats the error into text (%v).
		{fmt.Errorf("portforward: %v", opErr("read", syscall.ECONNRESET)), Reset},
		// Failures to connect are reported, not swallowed.
		{fmt.Errorf("failed to execute portforward in network namespace %q: %w", "host", opErr("dial", syscall.ECONNREFUSED)), ""},
		{fmt.Errorf("dial: %w", opErr("dial", syscall.EHOSTUNREACH)), ""},
		{errors.New("i/o timeout"), ""},
	} {
		if got := Of(c.err); got != c.want {
			t.Errorf("Of(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestFromMessage holds the words each known runtime writes on a
// port-forward error stream, as read on the wire.
func TestFromMessage(t *testing.T) {
	for _, c := range []struct {
		runtime, msg, want string
	}{
		{"containerd 2.4", `error forwarding port 9000 to pod 4f1c9a, uid : failed to execute portforward for "4f1c9a" port 9000: read tcp4 127.0.0.1:41234->127.0.0.1:9000: read: connection reset by peer`, Reset},
		{"containerd 2.4", `error forwarding port 9000 to pod 4f1c9a, uid : failed to execute portforward for "4f1c9a" port 9000: write tcp4 127.0.0.1:41234->127.0.0.1:9000: write: broken pipe`, BrokenPipe},
		{"containerd 1.6", `error forwarding port 9000 to pod 4f1c9a, uid : failed to execute portforward in network namespace "/var/run/netns/cni-1": read tcp4 127.0.0.1:41234->127.0.0.1:9000: read: connection reset by peer`, Reset},
		{"cri-streaming (reference runtime)", `error forwarding port 9000 to pod demo-sandbox, uid : copying from port 9000: read tcp 127.0.0.1:41234->127.0.0.1:9000: read: connection reset by peer`, Reset},
		{"containerd 2.4, refused", `error forwarding port 9000 to pod 4f1c9a, uid : failed to execute portforward in network namespace "/var/run/netns/cni-1": IPv4: dial tcp4 127.0.0.1:9000: connect: connection refused IPv6: dial tcp6 [::1]:9000: connect: cannot assign requested address`, ""},
		{"cri-streaming, refused", `error forwarding port 9000 to pod demo-sandbox, uid : dialing port 9000 in pod sandbox demo: dial tcp 127.0.0.1:9000: connect: connection refused`, ""},
		{"not a port-forward message", `read: connection reset by peer`, ""},
	} {
		if got := FromMessage(c.msg); got != c.want {
			t.Errorf("%s: FromMessage(%q) = %q, want %q", c.runtime, c.msg, got, c.want)
		}
	}
}
