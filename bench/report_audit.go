// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"
)

// writeAudit writes the section on what the audit log and a recording
// cost: kubestream with and without them, same run.
func (r *results) writeAudit(s *strings.Builder) {
	fmt.Fprintf(s, "\n## The audit log's and a recording's cost (kubestream with an audit log and terminal recordings against without, same run)\n\n| figure | kubestream | kubestream with audit (and recording) | with ÷ without | target | met |\n|---|---|---|---|---|---|\n")
	for _, f := range []struct {
		name, unit string
		m          map[string][]float64
		min        float64 // with ÷ without at least (0: no target)
	}{
		{"stdout throughput", "MB/s", r.stdoutMBps, 0},
		{fmt.Sprintf("tty stdout throughput, %d MiB (recorded with)", ttySize(r.size)>>20), "MB/s", r.ttyMBps, 0},
		{"stdin throughput", "MB/s", r.stdinMBps, 0.97},
		{"port-forward down", "MB/s", r.pfDownMBps, 0},
		{"setup to first byte p50", "ms", r.setupP50, 0},
		{"translator CPU per GiB stdout", "s", r.cpuStdout, 0},
		{"translator CPU per GiB stdin", "s", r.cpuStdin, 0},
		{"translator CPU per GiB tty stdout", "s", r.cpuTTY, 0},
		{"client, translator and backend CPU per GiB tty stdout", "s", r.sessionTTY, 0},
	} {
		without, with := median(f.m["kubestream"]), median(f.m["kubestream-audit"])
		target, met := "", ""
		if f.min > 0 {
			target = fmt.Sprintf("≥ %.2f", f.min)
			met = yesNo(with/without >= f.min)
		}
		fmt.Fprintf(s, "| %s | %.*f %s | %.*f %s | %s | %s | %s |\n", f.name, prec(f.unit), without, f.unit, prec(f.unit), with, f.unit, ratio(with, without), target, met)
	}
	r.writeAuditPairs(s)
	if len(r.ttyMBps["kubestream-audit"]) > 0 {
		r.writeRecordingFloors(s)
	}
}

// writeAuditPairs writes the back-to-back pairs' rows of the audit table.
func (r *results) writeAuditPairs(s *strings.Builder) {
	for _, pr := range []struct {
		name   string
		ratios []float64
		min    float64
	}{
		{"stdout throughput", r.auditPairs, 0.97},
		{fmt.Sprintf("tty stdout throughput, %d MiB (recorded with)", ttySize(r.size)>>20), r.ttyPairs, 0},
		{"… the disk's share alone (a recording's writes beside, no recorder)", r.diskPairs, 0},
		{"… the recorder's own: recorded ÷ the disk's writes alone (the recorder held to the disk)", r.recorderPairs, 0.90},
	} {
		if len(pr.ratios) == 0 {
			continue
		}
		summary, met := pairedVerdict(pr.ratios, pr.min)
		target := ""
		if pr.min > 0 {
			target = fmt.Sprintf("≥ %.2f", pr.min)
		} else {
			met = ""
		}
		fmt.Fprintf(s, "| %s, %d back-to-back pairs: median ratio | | | %s | %s | %s |\n",
			pr.name, len(pr.ratios), summary, target, met)
	}
}

// writeRecordingFloors says whether every recording held its session's
// output, and writes the two floors under a recording's cost measured in
// the same run.
func (r *results) writeRecordingFloors(s *strings.Builder) {
	if r.recordingCut != "" {
		fmt.Fprintf(s, "\nA recording stopped before its session ended (%s): the tty figure is not a recording's cost.\n", r.recordingCut)
	} else {
		fmt.Fprintf(s, "\nEvery recording held all of its session's output.\n")
	}
	if fw, whole := median(r.fileWrite), median(r.sessionTTY["kubestream"]); fw > 0 && whole > 0 {
		added := median(r.cpuTTY["kubestream-audit"]) - median(r.cpuTTY["kubestream"])
		fmt.Fprintf(s, "\nThe floor under any recording, same run: copying each frame out of the session's buffer and writing it to a file "+
			"1 MiB at a time, as the recorder does, with no encoding (bench/audit.go fileWriteCPU), costs %.2f CPU-s/GiB; the recording added %.2f CPU-s/GiB "+
			"to the translator. The unrecorded tty session costs its three processes %.2f CPU-s/GiB, so where the session already fills the cores, "+
			"even the floor would leave about %.2f of the throughput.\n", fw, added, whole, whole/(whole+fw))
	}
	if len(r.diskPairs) > 0 && len(r.ttyPairs) > 0 {
		fmt.Fprintf(s, "\nThe disk's share alone, same run: with only a recording's writes beside it (the same bytes, 1 MiB at a time as they "+
			"arrive, direct I/O as the recorder's, no recorder: bench/measure.go diskBeside), the unrecorded tty session kept %.2f of its "+
			"throughput (paired median): what writing the bytes to this disk costs any recorder here. The recorder's own share is what lies "+
			"between that and the recorded session's %.2f.\n", median(r.diskPairs), median(r.ttyPairs))
	}
}
