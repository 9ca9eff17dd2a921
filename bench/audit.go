// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubestream/kubestream/audit"
)

// measureAuditPairs measures, in back-to-back pairs (paired), what the
// audit log costs stdout, what a recording costs a tty session, what the
// disk's share of a recording costs it, and what the recorder costs beside
// that share.
func measureAuditPairs(ctx context.Context, paths []*path, o options, r *results, dir string) error {
	var err error
	without, with := pathNamed(paths, "kubestream"), pathNamed(paths, "kubestream-audit")
	n := max(15, 5*o.reps)
	if o.want("stdout") {
		stdout := func(p *path) func() (time.Duration, error) {
			return func() (time.Duration, error) { return p.stdout(ctx, o.size) }
		}
		if r.auditPairs, err = paired(n, stdout(without), stdout(with)); err != nil {
			return fmt.Errorf("audit log pairs: %w", err)
		}
		logf("audit log: stdout with ÷ without, %d pairs, median %.3f; in order: %s", len(r.auditPairs), median(r.auditPairs), ratiosText(r.auditPairs))
	}
	tty := func(p *path, diskDir string) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			d, err := p.ttyStdout(ctx, ttySize(o.size), diskDir)
			if err == nil && p == with {
				r.noteRecording(dir, ttySize(o.size))
			}
			return d, err
		}
	}
	if r.ttyPairs, err = paired(n, tty(without, ""), tty(with, "")); err != nil {
		return fmt.Errorf("recording pairs: %w", err)
	}
	logf("recording: tty stdout with ÷ without, %d pairs, median %.3f; in order: %s", len(r.ttyPairs), median(r.ttyPairs), ratiosText(r.ttyPairs))
	if r.diskPairs, err = paired(n, tty(without, ""), tty(without, dir)); err != nil {
		return fmt.Errorf("disk pairs: %w", err)
	}
	logf("the disk alone: tty stdout with a recording's writes beside ÷ without, %d pairs, median %.3f; in order: %s", len(r.diskPairs), median(r.diskPairs), ratiosText(r.diskPairs))
	// The recorder held to the disk, not the disk to itself: the
	// recorded session against the same session with the same bytes
	// written beside it and no recorder.
	if r.recorderPairs, err = paired(n, tty(without, dir), tty(with, "")); err != nil {
		return fmt.Errorf("recorder pairs: %w", err)
	}
	logf("the recorder: tty stdout recorded ÷ with the disk's writes alone, %d pairs, median %.3f; in order: %s", len(r.recorderPairs), median(r.recorderPairs), ratiosText(r.recorderPairs))
	return nil
}

// measureTTY takes one tty stdout transfer (kubestream, recorded on
// kubestream-audit): its throughput, the translator's CPU per GiB and the
// three processes' together; on kubestream-audit, the floor under the
// recording too (fileWriteCPU).
func (r *results) measureTTY(ctx context.Context, p *path, o options, dir string) error {
	cpu0, self0, back0 := p.proc.cpu(), procCPU(os.Getpid()), r.backend.cpu()
	d, err := p.ttyStdout(ctx, ttySize(o.size), "")
	if err != nil {
		return fmt.Errorf("%s tty stdout: %w", p.name, err)
	}
	cpu1, self1, back1 := p.proc.cpu(), procCPU(os.Getpid()), r.backend.cpu()
	r.ttyMBps[p.name] = append(r.ttyMBps[p.name], mbps(ttySize(o.size), d))
	r.cpuTTY[p.name] = append(r.cpuTTY[p.name], perGiB(cpu1-cpu0, ttySize(o.size)))
	r.sessionTTY[p.name] = append(r.sessionTTY[p.name], perGiB(cpu1-cpu0+self1-self0+back1-back0, ttySize(o.size)))
	if p.name == "kubestream-audit" {
		fw, err := fileWriteCPU(dir, ttySize(o.size))
		if err != nil {
			return err
		}
		r.fileWrite = append(r.fileWrite, fw)
		r.noteRecording(dir, ttySize(o.size))
	}
	return nil
}

// ttySize is the tty transfer: a recording writes all of it to disk (and
// goes after each repetition), so it is kept to 256 MiB a session; shorter
// transfers, a tenth of a second, left the ratio to chance.
func ttySize(size int64) int64 { return min(size, 256<<20) }

// noteRecording checks the recording a tty session of size bytes left in
// dir and removes it, to spare the disk. A recording that stopped (its disk
// fell behind) would make the figure a lie: it must hold every byte, and be
// closed (cut after its last event, not ending in the zeros it is
// allocated ahead with).
//
// The client has its exit status before the server's recorder has closed
// the file, so the check waits for it, a few seconds at most.
func (r *results) noteRecording(dir string, size int64) {
	var files []string
	complete := false
	for deadline := time.Now().Add(5 * time.Second); !complete && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		files, _ = filepath.Glob(filepath.Join(dir, "recordings", "*.cast"))
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Size() >= size && endsInNewline(f, st.Size()) {
				complete = true
			}
		}
	}
	for _, f := range files {
		_ = os.Remove(f)
	}
	if !complete && r.recordingCut == "" {
		r.recordingCut = "no reason on record"
		if why := recordingErrors(filepath.Join(dir, "audit.log")); why != "" {
			r.recordingCut = why
		}
	}
}

// fileWriteCPU is the CPU seconds per GiB this thread spends recording
// size bytes of output in the least work any recorder that never holds up
// its session can do: copy each 32 KiB frame out of the session's buffer
// into 128 KiB blocks (8 MiB of them, reused in turn) and write them to a
// new file in dir 1 MiB at a time, with direct I/O where the file system
// has it, as the recorder does; with no encoding. It is the floor under a
// recording's cost.
func fileWriteCPU(dir string, size int64) (float64, error) {
	frame := bytes.Repeat([]byte{'x'}, 32<<10)
	blocks := make([][]byte, 64)
	for i := range blocks {
		blocks[i] = make([]byte, 0, 128<<10)
	}
	fd, done, err := directFile(dir, "floor-*.cast")
	if err != nil {
		return 0, err
	}
	defer done()
	runtime.LockOSThread() // this thread's time alone
	defer runtime.UnlockOSThread()
	t0 := threadCPU()
	cur, first, off := 0, 0, int64(0)
	for n := int64(0); n < size; n += int64(len(frame)) {
		b := append(blocks[cur], frame...)
		blocks[cur] = b
		if len(b) < cap(b) {
			continue
		}
		if cur = (cur + 1) % len(blocks); (cur-first+len(blocks))%len(blocks) == 8 {
			w, err := unix.Pwritev(fd, blocks[first:first+8], off)
			if err != nil {
				return 0, err
			}
			off += int64(w)
			for i := first; i < first+8; i++ {
				blocks[i] = blocks[i][:0]
			}
			first = cur
		}
	}
	return (threadCPU() - t0).Seconds() * (1 << 30) / float64(size), nil
}

// directFile creates a file in dir for a recording's bytes, with direct
// I/O where the file system has it, as the recorder's (recording/file.go);
// done closes and removes it.
func directFile(dir, pattern string) (fd int, done func(), err error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return 0, nil, err
	}
	fd = int(f.Fd())
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags|unix.O_DIRECT)
	}
	return fd, func() { f.Close(); os.Remove(f.Name()) }, nil
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(rusageThread, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const rusageThread = 1 // RUSAGE_THREAD

// endsInNewline says whether the file of size bytes ends in a newline.
func endsInNewline(path string, size int64) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	last := make([]byte, 1)
	_, err = f.ReadAt(last, size-1)
	return err == nil && last[0] == '\n'
}

// recordingErrors is what the audit log says of recordings that failed.
func recordingErrors(path string) string {
	b, _ := os.ReadFile(path)
	var whys []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		var ev audit.Event
		if json.Unmarshal(line, &ev) == nil && ev.RecordingError != "" && !slices.Contains(whys, ev.RecordingError) {
			whys = append(whys, ev.RecordingError)
		}
	}
	return strings.Join(whys, "; ")
}
