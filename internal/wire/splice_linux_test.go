// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"io"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/kubestream/kubestream/internal/wiretest"
)

// TestSpliceChunksAllocateNothing: output spliced from a pipe costs no
// allocation per chunk (a process's output arrives a few KiB at a time, so
// anything per chunk is paid tens of thousands of times a GiB). Each 4 KiB
// write is read by the client before the next is made, so each is a chunk.
func TestSpliceChunksAllocateNothing(t *testing.T) {
	server, client := tcpPair(t)
	c := NewConn(wiretest.ServerWS(t, server, 0), &DefaultLimits)
	if err := skip101(client); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()

	const chunks, size = 2000, 4096
	// A chunk on the wire: the 4-byte header (a 16-bit length), the
	// channel byte, the payload.
	const onWire = 4 + 1 + size
	read := make(chan error, 1)
	next := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, onWire)
		for range chunks {
			if _, err := io.ReadFull(client, buf); err != nil {
				read <- err
				return
			}
			next <- struct{}{}
		}
	}()
	go func() {
		defer pw.Close()
		b := make([]byte, size)
		for range chunks {
			if _, err := pw.Write(b); err != nil {
				return
			}
			if _, ok := <-next; !ok {
				return
			}
		}
	}()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n, kernel, err := c.ReadFromChannel(1, pr, DefaultBufferSize)
	runtime.ReadMemStats(&after)
	if err != nil || !kernel || n != chunks*size {
		t.Fatalf("moved %d of %d bytes, by the kernel %v: %v", n, chunks*size, kernel, err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if allocs := after.Mallocs - before.Mallocs; allocs > chunks/20 {
		t.Fatalf("%d allocations for %d chunks, want none per chunk", allocs, chunks)
	}
}

// skip101 reads the upgrade's response off conn, up to its blank line.
func skip101(conn net.Conn) error {
	var last [4]byte
	b := make([]byte, 1)
	for string(last[:]) != "\r\n\r\n" {
		if _, err := conn.Read(b); err != nil {
			return err
		}
		copy(last[:], last[1:])
		last[3] = b[0]
	}
	return nil
}

// tcpPair is both ends of a loopback TCP connection, closed at the test's
// end: the accepted one, then the dialled one.
func tcpPair(t *testing.T) (*net.TCPConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c.(*net.TCPConn), peer
}
