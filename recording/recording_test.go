// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package recording

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

func (r *Recorder) backlog() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queued
}

// BenchmarkAppendEvent is the encoder alone on 32 KiB frames: terminal
// text (printable ASCII runs, a multi-byte character, an escape sequence,
// CR LF), and a bulk transfer's text with nothing to escape.
func BenchmarkAppendEvent(b *testing.B) {
	for _, c := range []struct{ name, unit string }{
		{"terminal", "drwxr-xr-x  2 root root 4096 Dec  3 23:12 kubestream-\u2713 \x1b[0m\r\n"},
		{"plain", "x"},
	} {
		b.Run(c.name, func(b *testing.B) {
			frame := []byte(strings.Repeat(c.unit, 32<<10)[:32<<10])
			b.SetBytes(int64(len(frame)))
			var out []byte
			for b.Loop() {
				out = appendEvent(out[:0], 1.5, 'o', frame)
			}
		})
	}
}

// TestSplitCharactersRecordedWhole: a multi-byte character cut between two
// output frames is recorded whole (a JSON string cannot hold half of one).
func TestSplitCharactersRecordedWhole(t *testing.T) {
	dir := t.TempDir()
	r, err := Start(dir, Meta{AuditID: "a1"}, []string{"sh"}, false)
	if err != nil {
		t.Fatal(err)
	}
	text := []byte("añ✓b€")
	for i := range text { // one byte per frame
		r.Output(1, text[i:i+1])
	}
	r.Input([]byte("not recorded"))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(filepath.Join(dir, "a1.cast"))
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	var out strings.Builder
	for sc.Scan() {
		var e [3]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e[1] != "o" {
			t.Fatalf("event %v", e)
		}
		out.WriteString(e[2].(string))
	}
	if out.String() != string(text) {
		t.Fatalf("recorded %q, want %q", out.String(), text)
	}
}

// TestEventsAcrossBlocks: events larger than a block, and events that
// start near a block's end, are encoded in pieces; the file still holds
// one JSON event per line and, decoded, exactly the text that was sent,
// with no character cut between pieces.
func TestEventsAcrossBlocks(t *testing.T) {
	dir := t.TempDir()
	r, err := Start(dir, Meta{AuditID: "a3"}, []string{"sh"}, false)
	if err != nil {
		t.Fatal(err)
	}
	unit := "ab✓\x1b[0m\"q\\€\r\n\x00z"
	var sent strings.Builder
	for i, size := range []int{1, 100 << 10, 7, blockSize - 5, 3 * blockSize, 33 << 10, 13} {
		frame := strings.Repeat(unit, size/len(unit)+1)[i%len(unit):]
		frame = frame[:min(len(frame), size)]
		// Whole characters only: a frame's cut tail would be held for
		// the next frame, which this test does not look at.
		for !utf8.ValidString(frame) {
			frame = frame[:len(frame)-1]
		}
		r.Output(1, []byte(frame))
		sent.WriteString(frame)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(filepath.Join(dir, "a3.cast"))
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 8*blockSize)
	sc.Scan() // header
	var got strings.Builder
	last := 0.0
	for sc.Scan() {
		var e [3]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %.80q…: %v", sc.Text(), err)
		}
		if at := e[0].(float64); e[1] != "o" || at < last {
			t.Fatalf("event %v after %v", e[:2], last)
		} else {
			last = at
		}
		got.WriteString(e[2].(string))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if got.String() != sent.String() {
		t.Fatalf("recorded %d bytes that differ from the %d sent", got.Len(), sent.Len())
	}
}

// TestMixedOutput: long plain runs and short ones, at a frame's start,
// middle and end, beside escapes and multi-byte characters, across the
// ends of aligned blocks, blocks and writes, come out in order and whole.
func TestMixedOutput(t *testing.T) {
	dir := t.TempDir()
	r, err := Start(dir, Meta{AuditID: "a4"}, []string{"sh"}, false)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	specials := []string{"\r\n", "✓", "\x1b[0m", "\"", "\\", "é", "\t"}
	var sent strings.Builder
	for range 300 {
		var frame strings.Builder
		for frame.Len() < 40<<10 {
			if rng.IntN(3) == 0 {
				frame.WriteString(specials[rng.IntN(len(specials))])
				continue
			}
			n := []int{1, align - 1, align, align + 1, 3 * align, blockSize + 17}[rng.IntN(6)]
			frame.WriteString(strings.Repeat(string(rune('a'+rng.IntN(26))), n))
		}
		r.Output(1, []byte(frame.String()))
		sent.WriteString(frame.String())
		for r.backlog() > MaxQueued/2 { // a session's pace (see BenchmarkRecord)
			time.Sleep(time.Millisecond)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := replayed(t, filepath.Join(dir, "a4.cast")); got != sent.String() {
		t.Fatalf("recorded %d bytes that differ from the %d sent", len(got), sent.Len())
	}
}

// TestQuietSessionOnDisk: when a session goes quiet, what it printed is in
// the file within flushDelay, although it does not fill an aligned block
// (padded with zeros, or written through the page cache), and what comes
// after it is written whole with it, however the file is written.
func TestQuietSessionOnDisk(t *testing.T) {
	for _, mode := range writeModes {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			r, err := start(dir, Meta{AuditID: "q"}, []string{"sh"}, false, mode.direct)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "q.cast")
			var sent strings.Builder
			for i, size := range []int{10, align + 10, 3 * blockSize, 100} {
				text := strings.Repeat(string(rune('a'+i)), size-2) + "\r\n"
				r.Output(1, []byte(text))
				sent.WriteString(text)
				deadline := time.Now().Add(10 * time.Second)
				for replayedSoFar(path) != sent.String() {
					if time.Now().After(deadline) {
						t.Fatalf("after %d bytes of output and a pause, the file holds %d", sent.Len(), len(replayedSoFar(path)))
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if got := replayed(t, path); got != sent.String() {
				t.Fatalf("recorded %d bytes that differ from the %d sent", len(got), sent.Len())
			}
		})
	}
}

// TestBusySessionNoTails: while a session keeps the writer busy (it
// handed over writeSize since the flush timer was set), its partial block
// is not handed to the writer on its own every flushDelay (each such tail
// went through the page cache, for the next direct write to take out
// again); the timer waits another flushDelay. Once the session is quiet
// it is. What the session printed is all there at the end.
func TestBusySessionNoTails(t *testing.T) {
	for _, mode := range writeModes {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			r, err := start(dir, Meta{AuditID: "busy"}, []string{"sh"}, false, mode.direct)
			if err != nil {
				t.Fatal(err)
			}
			chunk := []byte(strings.Repeat("0123456789abcde\n", writeSize/16))
			sent := "first\r\n" + string(chunk)
			// The test plays the timer: the real one is stopped each time
			// it is set, so a loaded machine cannot fire it in between.
			r.Output(1, []byte("first\r\n")) // sets the timer
			r.mu.Lock()
			r.flush.Stop()
			r.mu.Unlock()
			r.Output(1, chunk) // writeSize: busy
			r.mu.Lock()
			busy := r.moved
			r.mu.Unlock()
			if !busy {
				t.Fatal("writeSize of output did not mark the session busy")
			}
			r.flushTimer() // as if flushDelay had passed
			r.mu.Lock()
			r.flush.Stop()
			flushed, armed := r.flushed, r.armed
			r.mu.Unlock()
			if flushed || !armed {
				t.Fatalf("busy, the timer handed over the partial block (flushed %v) or stopped (armed %v)", flushed, armed)
			}
			r.flushTimer() // quiet since: the tail goes now
			r.mu.Lock()
			flushed = r.flushed || r.cur == nil
			r.mu.Unlock()
			if !flushed {
				t.Fatal("quiet, the timer did not hand over the partial block")
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if got := replayed(t, filepath.Join(dir, "busy.cast")); got != sent {
				t.Fatalf("recorded %d bytes that differ from the %d sent", len(got), len(sent))
			}
		})
	}
}

// replayedSoFar is the output of the events a recording's file holds
// whole (a last line being written is left out).
func replayedSoFar(path string) string {
	b, _ := os.ReadFile(path)
	got, _ := castOutput(b)
	return got
}

// castOutput is the output of the events in a recording's bytes, up to
// its last newline, and what is wrong with the first line that is not an
// event.
func castOutput(b []byte) (string, error) {
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 {
		return "", nil
	}
	var got strings.Builder
	for _, l := range lines[1 : len(lines)-1] { // after the header
		var e [3]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			return got.String(), fmt.Errorf("line %.80q…: %w", l, err)
		}
		got.WriteString(e[2].(string))
	}
	return got.String(), nil
}

// TestBigEvent: an event of many blocks, more than one wake's writeSize,
// is written in order, however the file is written (and the file says
// how it is).
func TestBigEvent(t *testing.T) {
	for _, mode := range writeModes {
		dir := t.TempDir()
		r, err := start(dir, Meta{AuditID: "b"}, nil, false, mode.direct)
		if err != nil {
			t.Fatal(err)
		}
		if r.direct != (mode.direct && runtime.GOOS == "linux") {
			t.Fatalf("%v: direct I/O %v", mode.name, r.direct)
		}
		text := strings.Repeat(strings.Repeat("y", 999)+"\n", 3*writeSize/1000)
		r.Output(1, []byte(text))
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if got := replayed(t, filepath.Join(dir, "b.cast")); got != text {
			t.Fatalf("%v: recorded %d bytes that differ from the %d sent", mode.name, len(got), len(text))
		}
	}
}

// TestQuietTailIsItsOwn: a quiet session's tail, written from a block
// that held another session's bytes before, holds none of them; an idle
// recording then holds no block; the file ends where its output does.
func TestQuietTailIsItsOwn(t *testing.T) {
	for range maxSpare {
		b := getBlock()
		putBlock(append(b, bytes.Repeat([]byte{'X'}, blockSize)...))
	}
	dir := t.TempDir()
	r, err := Start(dir, Meta{AuditID: "pad"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pad.cast")
	r.Output(1, []byte("secret-free\r\n"))
	deadline := time.Now().Add(10 * time.Second)
	for replayedSoFar(path) != "secret-free\r\n" {
		if time.Now().After(deadline) {
			t.Fatal("the output is not on disk")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.IndexByte(b, 'X') >= 0 {
		t.Fatalf("another session's bytes are in the file: %q", b)
	}
	// Idle, the recording holds no block: the writer took it, and the
	// blocks it wrote went back to spare.
	holdsNoBlock(t, r, deadline)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != int64(bytes.LastIndexByte(b, '\n')+1) {
		t.Fatalf("closed, the file is %v bytes (%v), want %d", fi.Size(), err, bytes.LastIndexByte(b, '\n')+1)
	}
}

// writeModes are the ways a recording's file is written: Start's (direct
// I/O where the platform has it) and the portable one.
var writeModes = []struct {
	name   string
	direct bool
}{{"direct", true}, {"buffered", false}}

// replayed is the output a recording's events hold, in order; it fails the
// test on a line that is not a JSON event, or a file cut short.
func replayed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := castOutput(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("%s ends in the middle of a line", path)
	}
	return got
}

// TestOverflowStopsRecordingNotSession: more output than the queue holds
// stops the recording (Close says so); Output never blocks.
func TestOverflowStopsRecordingNotSession(t *testing.T) {
	r, err := Start(t.TempDir(), Meta{AuditID: "a2"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("x", 64<<10))
	for i := 0; i < 4*MaxQueued/len(chunk); i++ {
		r.Output(1, chunk)
	}
	err = r.Close()
	if err != nil && !strings.Contains(err.Error(), "could not keep up") {
		t.Fatalf("close: %v", err)
	}
	t.Logf("after %d MiB at once: %v", 4*MaxQueued>>20, err)
	if _, err := Start(filepath.Join(t.TempDir(), "f"), Meta{AuditID: "x"}, nil, false); err != nil {
		t.Fatal(err) // a missing directory is created
	}
}

// TestEventEncoding: the hand-written event encoder says what
// encoding/json would, for every byte value and for split or invalid UTF-8.
func TestEventEncoding(t *testing.T) {
	var all []byte
	for i := 0; i < 256; i++ {
		all = append(all, byte(i))
	}
	for _, s := range []string{"plain", "a\"b\\c\n\r\t\x00\x1f\x7f", "ünïcödé ✓ €", string(all), "\xe2\x9c", ""} {
		line := appendEvent(nil, 1.5, 'o', []byte(s))
		var got [3]any
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("%q: %s does not decode: %v", s, line, err)
		}
		want, _ := json.Marshal(s)
		var w string
		_ = json.Unmarshal(want, &w)
		if got[0] != 1.5 || got[1] != "o" || got[2] != w {
			t.Errorf("%q: decoded %q, encoding/json gives %q", s, got, w)
		}
	}
}

// TestEscapeFoundAnywhere: a byte that needs escaping is found wherever it
// sits in a plain run, whichever of the word-at-a-time tests looks at it
// (the first eight bytes, a 32-byte stride, the tail).
func TestEscapeFoundAnywhere(t *testing.T) {
	for _, v := range []byte{0, 0x1b, 0x1f, '"', '\\', 0x7f, 0x80, 0xe2, 0xff, ' ', '!', '#', '[', ']', '~'} {
		for p := 0; p < 80; p++ {
			s := []byte(strings.Repeat("x", 80))
			s[p] = v
			got := appendJSONChars(nil, s)
			want, _ := json.Marshal(string(s))
			if string(got) != string(want[1:len(want)-1]) {
				t.Fatalf("byte %#x at %d: %s, encoding/json gives %s", v, p, got, want)
			}
		}
	}
}

// BenchmarkRecord is a recorded bulk tty session seen from the recording's
// side: 32 KiB output frames, of terminal text and of text with nothing to
// escape (the bench's tty transfer), with the writer's work (encoding, the
// file) counted until Close. Its cpu-s/GiB is what the recording adds to
// the node's CPU per GiB of output.
func BenchmarkRecord(b *testing.B) {
	for _, c := range []struct{ name, unit string }{
		{"terminal", "drwxr-xr-x  2 root root 4096 Dec  3 23:12 kubestream-\u2713 \x1b[0m\r\n"},
		{"plain", "x"},
	} {
		b.Run(c.name, func(b *testing.B) {
			frame := []byte(strings.Repeat(c.unit, 32<<10)[:32<<10])
			const frames = 8192 // 256 MiB a recording, as the bench's tty session
			b.SetBytes(frames * int64(len(frame)))
			dir := b.TempDir()
			cpu0 := processCPU()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			defer func() {
				gib := float64(b.N*frames*len(frame)) / (1 << 30)
				runtime.ReadMemStats(&m1)
				b.ReportMetric((processCPU()-cpu0).Seconds()/gib, "cpu-s/GiB")
				b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/(1<<20)/gib, "alloc-MiB/GiB")
				b.ReportMetric(float64(m1.NumGC-m0.NumGC)/gib, "gc/GiB")
			}()
			for i := 0; i < b.N; i++ {
				r, err := Start(dir, Meta{AuditID: strconv.Itoa(i)}, []string{"sh"}, false)
				if err != nil {
					b.Fatal(err)
				}
				for range frames {
					r.Output(1, frame)
					// A session's pace, not a tight loop's: the writer is
					// given time to keep within MaxQueued.
					for r.backlog() > MaxQueued/2 {
						time.Sleep(50 * time.Microsecond)
					}
				}
				if err := r.Close(); err != nil {
					b.Fatal(err)
				}
				os.Remove(r.Path())
			}
		})
	}
}

// processCPU is this process's user and system time, every goroutine's.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// appendEvent is one whole event as Recorder.event writes it in pieces.
func appendEvent(b []byte, at float64, kind byte, data []byte) []byte {
	return append(appendJSONChars(appendEventHead(b, at, kind), data), '"', ']')
}

// FuzzPlainUntil: the scan that finds the next byte to escape (a word at
// a time) agrees with a byte-at-a-time look, from any start.
func FuzzPlainUntil(f *testing.F) {
	f.Add([]byte(strings.Repeat("x", 100)+"\"tail"), 3)
	f.Add([]byte("drwxr-xr-x  2 root root 4096 Dec  3 23:12 kubestream-\u2713 \x1b[0m\r\n"), 0)
	f.Add([]byte(strings.Repeat("abcdefghijklmno\\", 9)), 17)
	f.Add([]byte(strings.Repeat("y", 150)+"\x7f\x1f"+strings.Repeat("z", 70)), 1)
	f.Fuzz(func(t *testing.T, s []byte, i int) {
		if i < 0 || i > len(s) {
			return
		}
		want := i
		for want < len(s) {
			if c := s[want]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
				break
			}
			want++
		}
		if got := plainUntil(s, i); got != want {
			t.Fatalf("plainUntil(%q, %d) = %d, want %d", s, i, got, want)
		}
	})
}

// TestPlainUntilEveryPosition: a byte to escape is found wherever it sits
// in a long plain run (in each word of the 64-byte test, and in the byte
// loop after it), from every start before it.
func TestPlainUntilEveryPosition(t *testing.T) {
	for _, c := range []byte{0x00, 0x1f, '"', '\\', 0x80, 0xff} {
		for at := range 200 {
			s := bytes.Repeat([]byte{'x'}, 210)
			s[at] = c
			for i := 0; i <= at; i++ {
				if got := plainUntil(s, i); got != at {
					t.Fatalf("byte %#x at %d, from %d: plainUntil = %d", c, at, i, got)
				}
			}
		}
	}
}

// TestQuietRecordingsTogether: recordings of quiet sessions share the spare
// blocks; a block one hands back while its tail is still to be copied
// must not be filled by another (each replays to its own output; -race
// sees any overlap).
func TestQuietRecordingsTogether(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("t%d", i)
			r, err := Start(dir, Meta{AuditID: id}, nil, false)
			if err != nil {
				errs <- err
				return
			}
			var sent strings.Builder
			for round := range 12 {
				text := strings.Repeat(string(rune('a'+i)), 100+round) + "\r\n"
				r.Output(1, []byte(text))
				sent.WriteString(text)
				time.Sleep(flushDelay + 10*time.Millisecond)
			}
			if err := r.Close(); err != nil {
				errs <- err
				return
			}
			if got := replayedSoFar(filepath.Join(dir, id+".cast")); got != sent.String() {
				errs <- fmt.Errorf("%s: recorded %q, want %q", id, got, sent.String())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkPlainUntil: the scan for the next byte to escape over plain
// text.
func BenchmarkPlainUntil(b *testing.B) {
	text := bytes.Repeat([]byte("plain terminal output, nothing to escape here. "), 1<<14)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if plainUntil(text, 0) < len(text)-16 {
			b.Fatal("stopped early")
		}
	}
}

// TestBusyRecordingReusesItsBlocks: a busy recording whose disk lags by
// more than spare holds (here half of MaxQueued behind) fills the blocks
// it has written again instead of allocating new ones, each of which
// costs page faults and brings the next garbage collection closer; quiet
// again, it holds none.
func TestBusyRecordingReusesItsBlocks(t *testing.T) {
	r, err := Start(t.TempDir(), Meta{AuditID: "busy"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	frame := bytes.Repeat([]byte{'x'}, 32<<10)
	output := func(n int) {
		for range n / len(frame) {
			r.Output(1, frame)
			for r.backlog() > MaxQueued/2 { // a session faster than its disk
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
	output(MaxQueued) // the recording's own blocks are allocated here
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	output(8 * MaxQueued)
	runtime.ReadMemStats(&m1)
	// What is allocated is bounded by what is in flight at the worst
	// moment (the queue, and what the writer took), not by the output.
	got := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("%d MiB of output allocated %d KiB", 8*MaxQueued>>20, got>>10)
	if got > MaxQueued {
		t.Errorf("%d MiB of output allocated %d MiB", 8*MaxQueued>>20, got>>20)
	}
	holdsNoBlock(t, r, time.Now().Add(10*time.Second))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// holdsNoBlock waits until the quiet recording r holds no block, as it
// should within flushDelay or two: every block written and given back.
func holdsNoBlock(t *testing.T, r *Recorder, deadline time.Time) {
	t.Helper()
	for {
		r.mu.Lock()
		held := len(r.full) + len(r.free)
		if r.cur != nil {
			held++
		}
		r.mu.Unlock()
		if held == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("quiet, the recording holds %d blocks", held)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
