// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package netns creates sockets inside another network namespace: a TCP
// listener or a connected UDP socket made by a thread that entered the
// namespace keeps it after the thread leaves, so the rest of the process
// uses it as any other socket.
//
// Reading order, each file before the files it uses: netns.go (Namespace
// and the sockets made in it), then netns_linux.go and netns_other.go (do:
// a function run on a thread inside the namespace, on Linux; the
// namespace's unprivileged port start).
//
// What runs back up the order: netns_linux.go and netns_other.go hang do
// on netns.go's Namespace and read its path and file (one type's method,
// one file per platform).
package netns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
)

// Namespace is a network namespace by path (/var/run/netns/…,
// /proc/PID/ns/net); "" is the process's own (host-network pods, the
// embedded reference runtime). One made by Open holds the namespace open,
// so a path that later names another namespace (a PID reused) changes
// nothing; Close lets it go.
type Namespace struct {
	Path string
	f    *os.File
}

// Open opens the namespace at path and holds it until Close.
func Open(path string) (Namespace, error) {
	if path == "" {
		return Namespace{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return Namespace{}, fmt.Errorf("opening network namespace: %w", err)
	}
	return Namespace{Path: path, f: f}, nil
}

// Close releases a namespace Open held.
func (ns Namespace) Close() error {
	if ns.f == nil {
		return nil
	}
	return ns.f.Close()
}

// ErrPortInUse is the cause when a listener's port is taken in the namespace.
var ErrPortInUse = errors.New("port already in use")

// ListenTCP listens on host:port in the namespace (host "" : 127.0.0.1, the
// pod's loopback, so only the pod's own processes reach it).
func (ns Namespace) ListenTCP(host string, port uint16) (net.Listener, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	var l net.Listener
	err := ns.do(func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil && l != nil {
		_ = l.Close() // made in the pod, but the thread could not leave it
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listening on %s in the pod's network namespace: %w", addr, ErrPortInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("listening on %s in the pod's network namespace: %w", addr, err)
	}
	return l, nil
}

// DialUDP makes a UDP socket connected to 127.0.0.1:port in the namespace.
func (ns Namespace) DialUDP(port uint16) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := ns.do(func() error {
		var err error
		c, err = net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
		return err
	})
	if err != nil {
		if c != nil {
			_ = c.Close() // made in the pod, but the thread could not leave it
		}
		return nil, fmt.Errorf("UDP socket to port %d in the pod's network namespace: %w", port, err)
	}
	return c, nil
}

// UnprivilegedPortStart is the namespace's
// net.ipv4.ip_unprivileged_port_start: binding a port below it takes
// CAP_NET_BIND_SERVICE there. It is read, never written.
func (ns Namespace) UnprivilegedPortStart() (int, error) {
	var start int
	err := ns.do(func() error {
		var err error
		start, err = unprivilegedPortStart()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reading the pod's unprivileged port start: %w", err)
	}
	return start, nil
}
