// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// blocked is a log that cannot be written until released.
type blocked struct{ release chan struct{} }

func (b blocked) Write(p []byte) (int, error) { <-b.release; return len(p), nil }
func (b blocked) Close() error                { return nil }

// TestRecordNeverBlocks: with the log stuck, records beyond the queue are
// dropped and counted, and Record returns at once.
func TestRecordNeverBlocks(t *testing.T) {
	out := blocked{release: make(chan struct{})}
	var drops atomic.Int32
	w := NewWriter(klog.Background(), out, 4, func() { drops.Add(1) })
	start := time.Now()
	for i := 0; i < 100; i++ {
		w.Record(&Event{Stage: StageResponseStarted})
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("100 records took %v with the log stuck", took)
	}
	// One is in the writer's hands, four queued: the rest dropped.
	if w.Dropped() < 95 || int(drops.Load()) != int(w.Dropped()) {
		t.Fatalf("dropped %d (told %d), want at least 95", w.Dropped(), drops.Load())
	}
	close(out.release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Record(&Event{}) // after Close: dropped silently, no panic
}

// TestFileInOrderAndRotated: records land one per line, in order, and the
// file rotates by size (lumberjack), keeping the backups asked for.
func TestFileInOrderAndRotated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	w, err := NewFile(klog.Background(), FileOptions{Path: path, MaxSizeMB: 1, MaxBackups: 2, QueueSize: 100000})
	if err != nil {
		t.Fatal(err)
	}
	cmd := []string{strings.Repeat("x", 1000)}
	const n = 3000 // ~3.3 MB: rotates at least twice
	for i := 0; i < n; i++ {
		w.Record(&Event{Stage: StageResponseComplete, RequestURI: "/exec/" + itoa(i), Command: cmd})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Dropped() != 0 {
		t.Fatalf("dropped %d with a queue larger than the burst", w.Dropped())
	}
	// lumberjack removes surplus backups in a goroutine of its own.
	var files []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		files, _ = filepath.Glob(filepath.Join(dir, "audit*.log"))
		if len(files) <= 3 || time.Now().After(deadline) {
			break
		}
	}
	if len(files) != 3 { // the live file and two backups
		t.Fatalf("files after rotation: %v", files)
	}
	// The live file holds the newest records, in order.
	f, _ := os.Open(path)
	defer f.Close()
	last := -1
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		i := atoi(strings.TrimPrefix(e.RequestURI, "/exec/"))
		if i <= last {
			t.Fatalf("record %d after %d", i, last)
		}
		last = i
	}
	if last != n-1 {
		t.Fatalf("the live file ends at record %d, want %d", last, n-1)
	}
	if _, err := NewFile(klog.Background(), FileOptions{Path: filepath.Join(dir, "missing", "audit.log")}); err == nil {
		t.Fatal("an unusable path was accepted")
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
func atoi(s string) int {
	var i int
	_ = json.Unmarshal([]byte(s), &i)
	return i
}

var _ io.WriteCloser = blocked{}
