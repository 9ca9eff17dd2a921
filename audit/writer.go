// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"gopkg.in/natefinch/lumberjack.v2"
	"k8s.io/klog/v2"
)

// FileOptions are the apiserver's audit log flags, with its names.
type FileOptions struct {
	// Path is the file ("-": standard output).
	Path string
	// MaxSizeMB rotates the file when it reaches this size (0: 100 MB,
	// lumberjack's default); MaxBackups and MaxAgeDays bound what rotated
	// files are kept (0: all).
	MaxSizeMB, MaxBackups, MaxAgeDays int
	// QueueSize bounds the records waiting to be written (0: 10000).
	QueueSize int
	// Dropped, when set, is told of each record dropped on a full queue.
	Dropped func()
}

// Writer is a Sink writing JSON lines through a bounded queue. One
// goroutine, started by NewFile and ended by Close, owns the file.
type Writer struct {
	queue   chan []byte
	out     io.WriteCloser
	dropped atomic.Uint64
	onDrop  func()
	logger  klog.Logger
	done    chan struct{}
	// mu guards closed: a session ending during shutdown records
	// nothing rather than sending on a closed queue.
	mu     sync.RWMutex
	closed bool
}

// NewFile opens the log (rotated by lumberjack, the apiserver's library)
// and starts its writer.
func NewFile(logger klog.Logger, o FileOptions) (*Writer, error) {
	var out io.WriteCloser
	switch o.Path {
	case "":
		return nil, fmt.Errorf("audit log path is empty")
	case "-":
		out = nopCloser{os.Stdout}
	default:
		// Fail now, not at the first record, when the path is unusable.
		f, err := os.OpenFile(o.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("opening the audit log: %w", err)
		}
		f.Close()
		out = &lumberjack.Logger{Filename: o.Path, MaxSize: o.MaxSizeMB, MaxBackups: o.MaxBackups, MaxAge: o.MaxAgeDays}
	}
	return NewWriter(logger, out, o.QueueSize, o.Dropped), nil
}

// NewWriter starts a writer on out.
func NewWriter(logger klog.Logger, out io.WriteCloser, queueSize int, dropped func()) *Writer {
	if queueSize <= 0 {
		queueSize = 10000
	}
	w := &Writer{queue: make(chan []byte, queueSize), out: out, onDrop: dropped, logger: logger, done: make(chan struct{})}
	go w.run()
	return w
}

// Record encodes e now (the caller may reuse it) and queues the line.
func (w *Writer) Record(e *Event) {
	line, err := json.Marshal(e)
	if err != nil {
		w.logger.Error(err, "Encoding an audit record")
		return
	}
	line = append(line, '\n')
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return
	}
	select {
	case w.queue <- line:
	default:
		// The session goes on; the loss is counted and said, once per
		// power of two so a flood does not flood the log too.
		n := w.dropped.Add(1)
		if w.onDrop != nil {
			w.onDrop()
		}
		if n&(n-1) == 0 {
			w.logger.Info("Audit records dropped: the audit log cannot keep up", "dropped", n)
		}
	}
}

// Dropped is how many records a full queue has cost so far.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

func (w *Writer) run() {
	defer close(w.done)
	for line := range w.queue {
		if _, err := w.out.Write(line); err != nil {
			w.logger.Error(err, "Writing the audit log")
		}
	}
}

// Close writes what is queued and closes the file; later records are
// dropped silently.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.done
		return nil
	}
	w.closed = true
	close(w.queue)
	w.mu.Unlock()
	<-w.done
	return w.out.Close()
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
