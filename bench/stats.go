// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"sort"
	"strconv"
	"strings"
	"time"
)

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s)-1) + 0.5)
	return s[i]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mbps(size int64, d time.Duration) float64 {
	return float64(size) / 1e6 / d.Seconds()
}

// perGiB is CPU time d spent on size bytes, in seconds per GiB.
func perGiB(d time.Duration, size int64) float64 {
	return d.Seconds() * (1 << 30) / float64(size)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func last(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return v[len(v)-1]
}

func parseKB(s string) int64 {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n
}
