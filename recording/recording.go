// Package recording writes terminal sessions (exec and attach with a tty)
// as asciicast v2 files, the format `asciinema play` replays: a JSON header
// line, then one JSON array per event, [seconds, "o"|"i"|"r", data].
//
// A recording never slows its session down to the disk's pace: events are
// encoded into a buffer bounded in bytes and written by one goroutine per
// recording; when the buffer is full, or the disk refuses a write, the
// recording stops (and says why in Close's error), the session goes on.
package recording

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
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

// MaxQueued bounds the encoded bytes a recording may have waiting for the
// disk.
const MaxQueued = 8 << 20

// blockSize is the unit the session encodes into and the writer writes:
// one write syscall each, and no buffer ever grows (growing one copied
// every byte again and again on a bulk session).
const blockSize = 128 << 10

// blocks are written blocks, shared by every recording: fresh memory costs
// a page fault per 4 KiB, which showed as a third of a bulk recording's
// cost when each recording allocated its own.
var blocks = sync.Pool{New: func() any { b := make([]byte, 0, blockSize); return &b }}

// errBehind stops a recording whose disk fell MaxQueued behind its session.
var errBehind = errors.New("recording stopped: the disk could not keep up with the session")

// Recorder records one session; its methods are translator.Observer's.
//
// The goroutine that forwards a frame encodes its event straight into the
// recording's current block, and the recording's writer goroutine takes
// the filled blocks and writes them. A byte is copied once in user space
// (while it is escaped) and once by the kernel: a queue of copied frames,
// encoded by the writer through a bufio.Writer, took four copies and cost
// a bulk tty session a quarter of its throughput.
type Recorder struct {
	path  string
	start time.Time
	hdr   Header
	stdin bool
	wake  chan struct{} // one slot: there are bytes to write; closed by Close
	done  chan error

	mu      sync.Mutex  // guards the fields below, taken by both session goroutines and the writer
	full    [][]byte    // encoded events the writer has not taken yet, in order
	cur     []byte      // the block being filled, the last of them
	queued  int         // bytes in full and cur
	flush   *time.Timer // wakes the writer for a partial block
	armed   bool        // flush is set, or the writer is about to take cur
	closed  bool        // wake is closed
	stopped error       // why events are no longer taken
	pending []byte      // the start of a UTF-8 sequence cut by a frame boundary
	headed  bool
}

// Start creates DIR/<auditID>.cast and its writer. An error means no
// recording; the session goes on.
func Start(dir string, meta Meta, command []string, withStdin bool) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("recording directory: %w", err)
	}
	path := filepath.Join(dir, meta.AuditID+".cast")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating the recording: %w", err)
	}
	meta.Stdin = withStdin
	now := time.Now()
	r := &Recorder{path: path, start: now, stdin: withStdin,
		hdr: Header{Version: 2, Width: 80, Height: 24, Timestamp: now.Unix(), Command: strings.Join(command, " "),
			Title: meta.Namespace + "/" + meta.Pod + "/" + meta.Container, Env: map[string]string{"TERM": "xterm"}, Kubestream: meta},
		wake: make(chan struct{}, 1), done: make(chan error, 1)}
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

// room makes sure the current block has at least n bytes free (n is
// small), starting a new one if not (mu held).
func (r *Recorder) room(n int) {
	if cap(r.cur)-len(r.cur) >= n {
		return
	}
	if len(r.cur) > 0 {
		r.full = append(r.full, r.cur)
	}
	r.cur = (*blocks.Get().(*[]byte))[:0]
}

// put appends b to the blocks (mu held).
func (r *Recorder) put(b []byte) {
	for len(b) > 0 {
		r.room(1)
		n := copy(r.cur[len(r.cur):cap(r.cur)], b)
		r.cur, b = r.cur[:len(r.cur)+n], b[n:]
		r.queued += n
	}
}

// event encodes [at, "kind", "data"] and a newline into the blocks and
// wakes the writer (mu held), or stops the recording when the writer is
// too far behind. The string is encoded in pieces that fit the current
// block (an escaped byte takes at most 6), cut only between characters.
func (r *Recorder) event(kind byte, data []byte) {
	if r.queued > MaxQueued {
		r.stopped = errBehind
		return
	}
	var head [48]byte
	r.put(appendEventHead(head[:0], time.Since(r.start).Seconds(), kind))
	for len(data) > 0 {
		r.room(64)
		n := min(len(data), (cap(r.cur)-len(r.cur))/6)
		for n < len(data) && n > 0 && !utf8.RuneStart(data[n]) {
			n--
		}
		before := len(r.cur)
		r.cur = appendJSONChars(r.cur, data[:n])
		r.queued += len(r.cur) - before
		data = data[n:]
	}
	r.put([]byte{'"', ']', '\n'})
	// The writer is woken for each filled block, and for a partial one
	// after flushDelay: waking it for every event cost a bulk session a
	// futex call and two context switches per frame.
	switch {
	case len(r.full) > 0:
		r.kick()
	case r.flush == nil:
		r.flush = time.AfterFunc(flushDelay, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.kick()
		})
	case !r.armed:
		r.flush.Reset(flushDelay)
	}
	r.armed = true
}

// flushDelay is how long an event may wait in a partial block.
const flushDelay = 50 * time.Millisecond

// kick wakes the writer (mu held); after Close there is none.
func (r *Recorder) kick() {
	if r.closed {
		return
	}
	select {
	case r.wake <- struct{}{}:
	default: // already awake, or about to be
	}
}

// take hands the writer every encoded byte (mu held).
func (r *Recorder) take() [][]byte {
	out := r.full
	if len(r.cur) > 0 {
		out = append(out, r.cur)
		r.cur = nil
	}
	r.full = nil
	r.queued = 0
	r.armed = false
	return out
}

// write is the recording's writer: at each wake it takes the blocks filled
// so far and writes them, until Close.
func (r *Recorder) write(f *os.File) {
	var werr error
	for open := true; open; {
		_, open = <-r.wake
		r.mu.Lock()
		out := r.take()
		r.mu.Unlock()
		for _, b := range out {
			if werr == nil {
				_, werr = f.Write(b)
			}
		}
		if werr != nil {
			r.mu.Lock()
			if r.stopped == nil {
				r.stopped = fmt.Errorf("recording stopped: %w", werr)
			}
			r.mu.Unlock()
		}
		for _, b := range out {
			if cap(b) == blockSize {
				blocks.Put(&b)
			}
		}
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	r.done <- werr
}

// Close ends the recording once everything encoded is written; the error
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

// appendEventHead appends an event up to its string's opening quote:
// [at, "kind", "
func appendEventHead(b []byte, at float64, kind byte) []byte {
	b = strconv.AppendFloat(append(b, '['), at, 'f', 6, 64)
	return append(b, ',', ' ', '"', kind, '"', ',', ' ', '"')
}

const hexDigits = "0123456789abcdef"

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plain8 reports whether none of w's eight bytes is a control character,
// a quote, a backslash or above ASCII (the classic "has a zero byte" word
// tricks: a byte below n, or equal to c, sets its high bit in the test).
func plain8(w uint64) bool {
	below := (w - ones*0x20) & ^w
	quote := w ^ (ones * '"')
	quote = (quote - ones) & ^quote
	bslash := w ^ (ones * '\\')
	bslash = (bslash - ones) & ^bslash
	return (below|quote|bslash|w)&highs == 0
}

// appendJSONChars appends s as the inside of a JSON string: printable
// ASCII copied in runs, control characters, quote and backslash escaped,
// valid UTF-8 as is, invalid bytes as U+FFFD (as encoding/json does).
// Hand-written because it runs on every output frame of a recorded
// session: encoding/json's reflection and its []any cost a third of the
// session's throughput on a bulk tty transfer; this is one pass.
func appendJSONChars(b []byte, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a second look: a
		// terminal's output is mostly printable ASCII.
		for i+8 <= len(s) && plain8(binary.LittleEndian.Uint64(s[i:i+8])) {
			i += 8
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	return append(b, s[start:]...)
}

// incompleteTail is how many bytes at the end of b start a UTF-8 sequence
// that is not complete yet (0-3).
func incompleteTail(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 { // a leading byte: is its sequence complete?
			if !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}
