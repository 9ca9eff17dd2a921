// Package recording writes terminal sessions (exec and attach with a tty)
// as asciicast v2 files, the format `asciinema play` replays: a JSON header
// line, then one JSON array per event, [seconds, "o"|"i"|"r", data].
//
// A recording never slows its session: events are copied into a queue
// bounded in bytes and written by one goroutine per recording; when the
// queue is full, or the disk refuses a write, the recording stops (and says
// why in Close's error), the session goes on.
package recording

import (
	"bufio"
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

// MaxQueued bounds the bytes a recording may have waiting for the disk.
const MaxQueued = 8 << 20

type event struct {
	at   float64
	kind string
	data []byte
	buf  *[]byte // data's pooled buffer, back to chunks once written
}

// chunks are the events' copies of output, reused: a recorded bulk session
// would otherwise allocate a frame's worth per frame.
var chunks = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

func chunk(p []byte) (data []byte, buf *[]byte) {
	buf = chunks.Get().(*[]byte)
	*buf = append((*buf)[:0], p...)
	return *buf, buf
}

// Recorder records one session; its methods are translator.Observer's.
type Recorder struct {
	path  string
	start time.Time
	hdr   Header
	stdin bool

	mu      sync.Mutex // guards the fields below, taken by both session goroutines
	queued  int
	stopped error  // why events are no longer taken
	pending []byte // the start of a UTF-8 sequence cut by a frame boundary
	headed  bool
	queue   chan event
	done    chan error
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
		queue: make(chan event, 1024), done: make(chan error, 1)}
	go r.write(f)
	return r, nil
}

// Path is the recording's file.
func (r *Recorder) Path() string { return r.path }

// Output records what the client was sent on stdout (with a tty, stderr is
// merged into it by the terminal).
func (r *Recorder) Output(_ byte, p []byte) { r.add("o", p, true) }

// Input records stdin when asked to.
func (r *Recorder) Input(p []byte) {
	if r.stdin {
		r.add("i", p, false)
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
	r.add("r", []byte(fmt.Sprintf("%dx%d", w, h)), false)
}

func (r *Recorder) add(kind string, p []byte, utf8Join bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped != nil {
		return
	}
	if !r.headed {
		r.headed = true
		h, _ := json.Marshal(r.hdr)
		r.send(event{kind: "header", data: h})
	}
	data := p
	if utf8Join {
		// A multi-byte character cut between two frames is recorded whole
		// with the second, as a terminal would show it. Only then is p
		// copied twice; otherwise once, into the event's string.
		if len(r.pending) > 0 {
			data = append(r.pending, p...)
			r.pending = nil
		}
		if cut := incompleteTail(data); cut > 0 {
			r.pending = append([]byte(nil), data[len(data)-cut:]...)
			data = data[:len(data)-cut]
		}
	}
	if len(data) == 0 {
		return
	}
	c, buf := chunk(data)
	r.send(event{at: time.Since(r.start).Seconds(), kind: kind, data: c, buf: buf})
}

// send queues e (mu held), or stops the recording when the writer is too
// far behind.
func (r *Recorder) send(e event) {
	if r.queued+len(e.data) > MaxQueued {
		r.stopped = errors.New("recording stopped: the disk could not keep up with the session")
		return
	}
	select {
	case r.queue <- e:
		r.queued += len(e.data)
	default:
		r.stopped = errors.New("recording stopped: the disk could not keep up with the session")
	}
}

func (r *Recorder) write(f *os.File) {
	w := bufio.NewWriterSize(f, 64<<10)
	var werr error
	var line []byte // reused: one event's JSON
	for e := range r.queue {
		r.mu.Lock()
		r.queued -= len(e.data)
		r.mu.Unlock()
		if werr != nil {
			release(e)
			continue // keep draining so the session never waits
		}
		line = line[:0]
		if e.kind == "header" {
			line = append(line, e.data...)
		} else {
			line = appendEvent(line, e)
		}
		release(e)
		if _, werr = w.Write(append(line, '\n')); werr != nil {
			continue
		}
		if len(r.queue) == 0 {
			werr = w.Flush()
		}
	}
	if werr == nil {
		werr = w.Flush()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	r.done <- werr
}

// Close ends the recording once everything queued is written; the error
// says whether it is complete.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if len(r.pending) > 0 && r.stopped == nil {
		r.send(event{at: time.Since(r.start).Seconds(), kind: "o", data: r.pending})
	}
	stopped := r.stopped
	if stopped == nil {
		r.stopped = errors.New("closed")
	}
	close(r.queue)
	r.mu.Unlock()
	werr := <-r.done
	if werr != nil {
		return fmt.Errorf("writing the recording: %w", werr)
	}
	return stopped
}

func release(e event) {
	if e.buf != nil {
		chunks.Put(e.buf)
	}
}

// appendEvent appends [at, "kind", "data"] as JSON. Hand-written because
// it runs on every output frame of a recorded session: encoding/json's
// reflection and its []any cost a third of the session's throughput on a
// bulk tty transfer; this is one pass over the bytes.
func appendEvent(b []byte, e event) []byte {
	b = append(b, '[')
	b = strconv.AppendFloat(b, e.at, 'f', 6, 64)
	b = append(b, `, "`...)
	b = append(b, e.kind...)
	b = append(b, `", `...)
	return append(appendJSONString(b, e.data), ']')
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

// appendJSONString quotes s as JSON: printable ASCII copied in runs,
// control characters, quote and backslash escaped, valid UTF-8 as is,
// invalid bytes as U+FFFD (as encoding/json does).
func appendJSONString(b []byte, s []byte) []byte {
	b = append(b, '"')
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
	b = append(b, s[start:]...)
	return append(b, '"')
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
