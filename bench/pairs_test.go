// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import "testing"

// TestMedianCI: the sign test's order statistics, as tables give them
// (n = 15: the 4th and 12th, 96.5%; n = 6: the extremes, 96.9%).
func TestMedianCI(t *testing.T) {
	q := make([]float64, 15)
	for i := range q {
		q[i] = float64(i + 1)
	}
	if lo, hi, level, ok := medianCI(q); !ok || lo != 4 || hi != 12 || level < 0.964 || level > 0.966 {
		t.Fatalf("n=15: %v–%v at %.4f (%v), want 4–12 at 0.965", lo, hi, level, ok)
	}
	if lo, hi, _, ok := medianCI(q[:6]); !ok || lo != 1 || hi != 6 {
		t.Fatalf("n=6: %v–%v (%v), want 1–6", lo, hi, ok)
	}
	if _, _, _, ok := medianCI(q[:5]); ok {
		t.Fatal("n=5 has no 95% interval")
	}
	for _, c := range []struct {
		min  float64
		want string
	}{{3, "yes"}, {13, "**no**"}, {8.5, "not told apart"}} {
		if _, met := pairedVerdict(q, c.min); met != c.want {
			t.Fatalf("target %v: %q, want %q", c.min, met, c.want)
		}
	}
}
