// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"net"
	"testing"
)

// TestReverseLoad drives the reverse group's openers straight at its
// services, no session between: each figure's work completes and counts.
func TestReverseLoad(t *testing.T) {
	s, err := startServices()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if r, err := connRate(s.echo.Addr().String(), 50, 4); err != nil || r <= 0 {
		t.Fatalf("connRate: %v, %v", r, err)
	}
	for _, e := range []transferEnd{{s.sink.Addr().String(), true}, {s.source.Addr().String(), false}} {
		if _, err := transfer(e, 1<<20+17); err != nil {
			t.Fatalf("transfer %+v: %v", e, err)
		}
	}
	echo, err := udpEcho()
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	r, err := udpRate(echo.LocalAddr().(*net.UDPAddr), 1400, 200)
	if err != nil || r.sent != 200 || r.perSec <= 0 {
		t.Fatalf("udpRate: %+v, %v", r, err)
	}
}
