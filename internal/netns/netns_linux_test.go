// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kubestream/kubestream/internal/nstest"
)

// newNamespace is a throwaway network namespace (nstest.Bound).
func newNamespace(t *testing.T) Namespace { return Namespace{Path: nstest.Bound(t)} }

func TestListenerLivesInTheNamespace(t *testing.T) {
	ns := newNamespace(t)
	l, err := ns.ListenTCP("", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	// Not from here: this namespace's loopback is another one.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("the pod's listener on %s is reachable from the test's namespace", addr)
	}
	// From inside, yes.
	err = ns.do(func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("dialling the listener from inside: %v", err)
	}
	<-accepted
	// The same port again is a clear error.
	if _, err := ns.ListenTCP("", port); !errors.Is(err, ErrPortInUse) {
		t.Fatalf("second listener on port %d: %v, want ErrPortInUse", port, err)
	}
}

func TestUDPSocketLivesInTheNamespace(t *testing.T) {
	ns := newNamespace(t)
	var srv *net.UDPConn
	if err := ns.do(func() error {
		var err error
		srv, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := uint16(srv.LocalAddr().(*net.UDPAddr).Port)
	c, err := ns.DialUDP(port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	n, _, err := srv.ReadFromUDP(buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("datagram inside the namespace: %q %v", buf[:n], err)
	}
}

func TestCurrentNamespace(t *testing.T) {
	l, err := Namespace{}.ListenTCP("", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("empty path must be this namespace: %v", err)
	}
	c.Close()
}

// A socket made in the namespace by a thread that then cannot leave it is
// closed, not left open with an error returned.
func TestSocketClosedWhenLeavingFails(t *testing.T) {
	saved := homeNS
	homeNS = "/dev/null" // setns on it fails: the thread cannot go back
	defer func() { homeNS = saved }()
	ns := Namespace{Path: "/proc/self/ns/net"} // entering it works; leaving is what fails
	var port int
	if _, err := ns.ListenTCP("", 0); err == nil {
		t.Fatal("the way back failed, and ListenTCP said nothing")
	}
	// The listener it made (on a port the kernel chose) must be gone: no
	// descriptor of this process is a listening socket it did not close.
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		link, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if n, err := strconv.Atoi(fd.Name()); err == nil && n > 2 && len(link) > 8 && link[:8] == "socket:[" {
			port++
		}
	}
	if port != 0 {
		t.Fatalf("%d sockets left open after a failed way back", port)
	}
	if _, err := ns.DialUDP(9); err == nil {
		t.Fatal("the way back failed, and DialUDP said nothing")
	}
}

// The unprivileged port start is the namespace's own: a fresh namespace
// has the kernel's default, whatever the host's.
func TestUnprivilegedPortStart(t *testing.T) {
	ns := newNamespace(t)
	got, err := ns.UnprivilegedPortStart()
	if err != nil {
		t.Fatal(err)
	}
	if got != 1024 {
		t.Fatalf("a fresh namespace's unprivileged port start: %d, want the kernel's 1024", got)
	}
	if _, err := (Namespace{}).UnprivilegedPortStart(); err != nil {
		t.Fatal(err)
	}
}
