// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// paired measures what the audit log, a recording or a recording's disk
// writes cost a transfer, as throughput ratios of n back-to-back pairs
// (with ÷ without), the order alternating between pairs. Each cost is
// within this machine's spread from one transfer to the next: the medians
// of three unpaired repetitions, taken minutes apart, put the audit log's
// ratio anywhere between 0.93 and 1.01, and one tty session's anywhere
// within ±0.1.
func paired(n int, without, with func() (time.Duration, error)) ([]float64, error) {
	ratios := make([]float64, 0, n)
	for i := range n {
		first, second := without, with
		if i%2 == 1 {
			first, second = with, without
		}
		d0, err := first()
		if err != nil {
			return nil, fmt.Errorf("pair %d: %w", i, err)
		}
		d1, err := second()
		if err != nil {
			return nil, fmt.Errorf("pair %d: %w", i, err)
		}
		if i%2 == 1 {
			d0, d1 = d1, d0
		}
		ratios = append(ratios, d0.Seconds()/d1.Seconds()) // throughput with ÷ without
	}
	return ratios, nil
}

// medianCI is a distribution-free confidence interval for the median of
// the paired ratios q (sorted), at least 95%: the order statistics
// q[k-1] and q[n-k], with k the largest for which a median outside them
// has a chance of at most 2.5% on each side (the sign test's binomial).
// Pairs of one bulk session vary by ±0.2 here, so a median alone cannot
// say whether a target a few hundredths away is met; the interval can.
// ok is false for fewer than 6 pairs, which no such interval covers.
func medianCI(q []float64) (lo, hi, level float64, ok bool) {
	n := len(q)
	tail := 0.0 // P(Binomial(n, 1/2) < k)
	k := 0
	for j := 0; ; j++ {
		p := binomHalf(n, j)
		if tail+p > 0.025 {
			break
		}
		tail += p
		k = j + 1
	}
	if k == 0 {
		return 0, 0, 0, false
	}
	return q[k-1], q[n-k], 1 - 2*tail, true
}

// binomHalf is P(Binomial(n, 1/2) = j).
func binomHalf(n, j int) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
	return math.Exp(lg(n) - lg(j) - lg(n-j) - float64(n)*math.Ln2)
}

// pairedVerdict says whether paired ratios meet a target minimum: yes
// when the median's interval lies at or above it, no when below, and
// "not told apart" when the interval holds it (the pairs' noise hides the
// difference).
func pairedVerdict(ratios []float64, min float64) (summary, met string) {
	q := slices.Sorted(slices.Values(ratios))
	m := median(q)
	lo, hi, level, ok := medianCI(q)
	if !ok {
		return fmt.Sprintf("%.2f (range %.2f–%.2f)", m, q[0], q[len(q)-1]), yesNo(m >= min)
	}
	summary = fmt.Sprintf("%.2f (%.0f%% interval %.2f–%.2f, range %.2f–%.2f)", m, 100*level, lo, hi, q[0], q[len(q)-1])
	switch {
	case lo >= min:
		met = "yes"
	case hi < min:
		met = "**no**"
	default:
		met = "not told apart"
	}
	return summary, met
}

// ratiosText is paired ratios as the log prints them, in the order
// measured, so runs' pairs can be pooled.
func ratiosText(ratios []float64) string {
	var b strings.Builder
	for i, x := range ratios {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.3f", x)
	}
	return b.String()
}
