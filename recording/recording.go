// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package recording writes terminal sessions (exec and attach with a tty)
// as asciicast v2 files, the format `asciinema play` replays: a JSON header
// line, then one JSON array per event, [seconds, "o"|"i"|"r", data].
//
// A recording never slows its session down to the disk's pace: events are
// encoded into blocks bounded in bytes (MaxQueued), and one writer
// goroutine per recording writes them, past the page cache on Linux
// (O_DIRECT: a recording is written once and rarely read) and through it
// elsewhere; when the blocks are full, or the disk refuses a write, the
// recording stops (and says why in Close's error), the session goes on.
//
// Reading order, each file before the files it uses: recording.go
// (Recorder: Start, the events, Close), writer.go (the writer goroutine
// and what hands it blocks), blocks.go (the blocks events are encoded
// into, and their spares), encode.go (an event's JSON), file.go (the file,
// written at explicit offsets) with file_linux.go and file_other.go (its
// writes: O_DIRECT on Linux, the page cache elsewhere).
//
// What runs back up the order: writer.go and blocks.go hang methods on
// recording.go's Recorder and share its state (one type's methods spread
// over files by job, so each file stays small); file_linux.go and
// file_other.go hang write and setDirect on file.go's file (one file per
// platform).
//
// Who imports it: server, which records, and cmd/kubestream, which lists
// and replays recordings.
package recording

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Meta is what the header says about the session beside asciicast's own
// fields, under "kubestream".
type Meta struct {
	AuditID     string `json:"auditID"`
	Node        string `json:"node,omitempty"`
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	Container   string `json:"container"`
	Subresource string `json:"subresource"`
	User        string `json:"user,omitempty"`
	Stdin       bool   `json:"stdinRecorded"`
}

// Header is an asciicast v2 header.
type Header struct {
	Version    int               `json:"version"`
	Width      int               `json:"width"`
	Height     int               `json:"height"`
	Timestamp  int64             `json:"timestamp"`
	Command    string            `json:"command,omitempty"`
	Title      string            `json:"title,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Kubestream Meta              `json:"kubestream"`
}

// MaxQueued bounds the bytes a recording may have waiting for the disk:
// enough to ride out a disk's pauses on a bulk tty session (a smaller
// queue cut the bench's recordings; docs/audit-and-recordings.md).
const MaxQueued = 32 << 20

// writeSize is how much of filled blocks the session hands the writer at
// once: each hand-over wakes the writer's thread, and a direct write
// costs less CPU the larger it is.
const writeSize = 4 << 20

// flushDelay is how long an event may wait in a partial block when the
// session is quiet (twice that while it is busy: see flushTimer).
const flushDelay = 50 * time.Millisecond

// errBehind stops a recording whose disk fell MaxQueued behind its session.
var errBehind = errors.New("recording stopped: the disk could not keep up with the session")

// Recorder records one session; its methods are translator.Observer's.
//
// Two goroutines share it. The session's goroutine that forwards a frame
// encodes its event straight into the recording's current block, in the
// one pass that escapes it (a queue of raw copies for the writer to
// encode cost a copy more), and hands each writeSize of filled blocks to
// the recording's writer goroutine (writer.go), which writes them
// (file.go) and ends at Close. Blocks are cut at aligned lengths while
// the file takes direct I/O; the rest of a block begins the next one
// (blocks.go).
type Recorder struct {
	path  string
	start time.Time
	hdr   Header
	stdin bool
	wake  chan struct{} // one slot: there are bytes to write; closed by Close
	done  chan error    // the writer's end: the error it stopped on, or nil

	mu      sync.Mutex  // guards the fields below; taken by the session's goroutines, the flush timer and the writer
	full    [][]byte    // filled blocks the writer has not taken yet, in order
	cur     []byte      // the block being filled; nil after the writer took it
	carry   []byte      // what the next block begins with: the unaligned tail of the block the writer took last
	queued  int         // bytes in full and cur
	direct  bool        // the file takes direct I/O: blocks are cut at aligned lengths
	flush   *time.Timer // wakes the writer for everything, writeSize or not
	armed   bool        // flush is set
	moved   bool        // writeSize was handed to the writer since flush was set: the session is busy
	flushed bool        // flush fired: the writer takes cur too
	closed  bool        // wake is closed
	stopped error       // why events are no longer taken
	free    stack       // written blocks to fill again, this recording's until it goes quiet or ends (then spare's)
	pending []byte      // the start of a UTF-8 sequence cut by a frame boundary
	headed  bool        // the header is written: a resize is an event
}

// Start creates DIR/<auditID>.cast and its writer, with direct I/O where
// the platform and file system have it. An error means no recording; the
// session goes on.
func Start(dir string, meta Meta, command []string, withStdin bool) (*Recorder, error) {
	return start(dir, meta, command, withStdin, true)
}

// start is Start, asking for direct I/O or not.
func start(dir string, meta Meta, command []string, withStdin, direct bool) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("recording directory: %w", err)
	}
	path := filepath.Join(dir, meta.AuditID+".cast")
	f, err := createFile(path, direct)
	if err != nil {
		return nil, fmt.Errorf("creating the recording: %w", err)
	}
	meta.Stdin = withStdin
	now := time.Now()
	r := &Recorder{path: path, start: now, stdin: withStdin,
		hdr: Header{Version: 2, Width: 80, Height: 24, Timestamp: now.Unix(), Command: strings.Join(command, " "),
			Title: meta.Namespace + "/" + meta.Pod + "/" + meta.Container, Env: map[string]string{"TERM": "xterm"}, Kubestream: meta},
		direct: f.direct, wake: make(chan struct{}, 1), done: make(chan error, 1)}
	go r.write(f)
	return r, nil
}

// Path is the recording's file.
func (r *Recorder) Path() string { return r.path }

// Output records what the client was sent on stdout (with a tty, stderr is
// merged into it by the terminal).
func (r *Recorder) Output(_ byte, p []byte) { r.add('o', p, true) }

// Input records stdin when asked to.
func (r *Recorder) Input(p []byte) {
	if r.stdin {
		r.add('i', p, false)
	}
}

// Resize records a terminal size; one that comes before any output is the
// header's (the size the terminal has when output begins).
func (r *Recorder) Resize(w, h uint16) {
	r.mu.Lock()
	if !r.headed {
		r.hdr.Width, r.hdr.Height = int(w), int(h)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.add('r', []byte(fmt.Sprintf("%dx%d", w, h)), false)
}

func (r *Recorder) add(kind byte, p []byte, utf8Join bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped != nil {
		return
	}
	if !r.headed {
		r.headed = true
		h, _ := json.Marshal(r.hdr)
		r.put(append(h, '\n'))
	}
	data := p
	if utf8Join {
		// A multi-byte character cut between two frames is recorded whole
		// with the second, as a terminal would show it.
		if len(r.pending) > 0 {
			data = append(r.pending, p...)
			r.pending = nil
		}
		if cut := incompleteTail(data); cut > 0 {
			r.pending = append([]byte(nil), data[len(data)-cut:]...)
			data = data[:len(data)-cut]
		}
	}
	if len(data) > 0 {
		r.event(kind, data)
	}
}

// event encodes [at, "kind", "data"] and a newline into the blocks and
// wakes the writer when there is writeSize to write (mu held), or stops the recording when the disk is too far behind. The
// string is encoded in pieces that fit the current block (an escaped byte
// takes at most 6), cut only between characters.
func (r *Recorder) event(kind byte, data []byte) {
	if r.queued > MaxQueued {
		r.stopped = errBehind
		return
	}
	var head [48]byte
	r.put(appendEventHead(head[:0], time.Since(r.start).Seconds(), kind))
	for len(data) > 0 {
		r.room(64)
		n := cutAt(data, (cap(r.cur)-len(r.cur))/6)
		before := len(r.cur)
		r.cur = appendJSONChars(r.cur, data[:n])
		r.queued += len(r.cur) - before
		data = data[n:]
	}
	r.put([]byte{'"', ']', '\n'})
	// Written a writeSize of filled blocks at a time, and the rest
	// flushDelay after an event: waking the writer for every event cost a
	// bulk session a futex call and two context switches per frame.
	switch {
	case len(r.full)*blockSize >= writeSize:
		r.moved = true
		r.kick()
	case r.armed:
	case r.flush == nil:
		r.flush = time.AfterFunc(flushDelay, r.flushTimer)
		r.armed = true
	default:
		r.flush.Reset(flushDelay)
		r.armed = true
	}
}

// Close ends the recording once everything queued is written; the error
// says whether it is complete.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if len(r.pending) > 0 && r.stopped == nil {
		r.event('o', r.pending)
	}
	stopped := r.stopped
	if stopped == nil {
		r.stopped = errors.New("closed")
	}
	if r.flush != nil {
		r.flush.Stop()
	}
	r.closed = true
	close(r.wake)
	r.mu.Unlock()
	if werr := <-r.done; werr != nil {
		return fmt.Errorf("writing the recording: %w", werr)
	}
	return stopped
}
