// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestRelay: bytes cross the relay unchanged both ways, a half-close is
// passed on (the echo target answers everything, then ends), and stop
// leaves nothing running.
func TestRelay(t *testing.T) {
	defer goleak.VerifyNone(t)
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	echoDone := make(chan struct{})
	go func() {
		defer close(echoDone)
		c, err := target.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	r, err := startRelay(target.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer r.stop()

	c, err := net.Dial("tcp", r.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := make([]byte, 3<<20+17)
	_, _ = rand.Read(data)
	go func() {
		_, _ = c.Write(data)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes back, want the %d sent", len(got), len(data))
	}
	<-echoDone
}

// TestMetOnlyWhenMeasured: a figure left out with -only is neither met
// nor missed, and a measured one is judged against its target.
func TestMetOnlyWhenMeasured(t *testing.T) {
	r := newResults(options{reps: 1, inproc: true})
	r.stdoutMBps["direct"] = []float64{1000}
	r.stdoutMBps["kubestream"] = []float64{950}
	r.stdinMBps["direct"] = []float64{1000}
	r.stdinMBps["kubestream"] = []float64{800}
	for _, rw := range r.rows() {
		switch rw.name {
		case "stdout throughput":
			if rw.met == nil || !*rw.met {
				t.Errorf("stdout 0.95× direct not met")
			}
		case "stdin throughput":
			if rw.met == nil || *rw.met {
				t.Errorf("stdin 0.8× direct counted as met")
			}
		case "echo round trip p50":
			if rw.met != nil {
				t.Errorf("unmeasured echo judged: %v", *rw.met)
			}
		}
	}
}
