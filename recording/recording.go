// Package recording writes terminal sessions (exec and attach with a tty)
// as asciicast v2 files, the format `asciinema play` replays: a JSON header
// line, then one JSON array per event, [seconds, "o"|"i"|"r", data].
//
// A recording never slows its session down to the disk's pace: events are
// encoded into blocks bounded in bytes, and written with asynchronous
// direct writes that the session's goroutine submits and never waits for
// (or, where the kernel or file system refuses those, by one writer
// goroutine per recording); when the blocks are full, or the disk refuses a
// write, the recording stops (and says why in Close's error), the session
// goes on.
package recording

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
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

// MaxQueued bounds the bytes a recording may have waiting for the disk:
// tens of milliseconds of a bulk tty session, enough to ride out a disk's
// pauses (8 MiB was not: the bench's recordings were cut; figures in
// docs/performance.md).
const MaxQueued = 32 << 20

// blockSize is the unit the session encodes into and the writer writes
// (writeSize of them at once): no buffer ever grows (growing one copied
// every byte again and again on a bulk session).
const blockSize = 128 << 10

// spare keeps written blocks for the next ones, every recording's, up to
// maxSpare of them (8 MiB, kept for the process's life once a bulk
// recording has used them). Fresh memory costs a page fault per 4 KiB,
// which showed as a third of a bulk recording's cost when each recording
// allocated its own; a sync.Pool is emptied by every garbage collection,
// which a bulk session brings every few MiB.
var spare struct {
	sync.Mutex
	blocks [][]byte
}

const maxSpare = 8 << 20 / blockSize

func getBlock() []byte {
	spare.Lock()
	defer spare.Unlock()
	if n := len(spare.blocks); n > 0 {
		b := spare.blocks[n-1]
		spare.blocks[n-1] = nil
		spare.blocks = spare.blocks[:n-1]
		return b
	}
	return make([]byte, 0, blockSize)
}

func putBlock(b []byte) {
	if cap(b) != blockSize {
		return
	}
	spare.Lock()
	defer spare.Unlock()
	if len(spare.blocks) < maxSpare {
		spare.blocks = append(spare.blocks, b[:0])
	}
}

// errBehind stops a recording whose disk fell MaxQueued behind its session.
var errBehind = errors.New("recording stopped: the disk could not keep up with the session")

// Recorder records one session; its methods are translator.Observer's.
//
// The goroutine that forwards a frame encodes its event straight into the
// recording's current block, in the one pass that escapes it (a queue of
// raw copies for the writer to encode cost a copy more). Each writeSize of
// filled blocks it submits to the disk itself, asynchronously (see file),
// or, without that, hands to the recording's writer goroutine. Handing
// them over woke a second thread some 550 times a second on a bulk
// session, which cost it more than everything else the recording does.
// Blocks are cut at aligned lengths so that the file can take them with
// direct I/O.
type Recorder struct {
	path  string
	start time.Time
	hdr   Header
	stdin bool
	wake  chan struct{} // one slot: there are bytes to write; closed by Close
	done  chan error

	mu      sync.Mutex  // guards the fields below, taken by both session goroutines, the flush timer and the writer ("the writer" below: submit too)
	full    [][]byte    // encoded blocks the writer has not taken yet, in order, each cut at an aligned length while direct
	cur     []byte      // the block being filled; nil after the writer took it
	carry   []byte      // what the next block begins with: the tail of the block the writer took last
	queued  int         // bytes in full and cur
	direct  bool        // the file takes direct I/O: blocks are cut at aligned lengths
	flush   *time.Timer // wakes the writer for everything, writeSize or not
	armed   bool        // flush is set
	moved   bool        // writeSize was handed to the writer since flush was set: the session is busy
	flushed bool        // flush fired: the writer takes cur too
	closed  bool        // wake is closed
	stopped error       // why events are no longer taken
	pending []byte      // the start of a UTF-8 sequence cut by a frame boundary
	headed  bool
	tails   int // partial blocks written on their own: through the page cache, or padded (tests)

	// file is set when its writes are asynchronous: whoever fills or
	// flushes blocks submits them (mu held), and there is no writer.
	file *file
}

// Start creates DIR/<auditID>.cast and its writer. An error means no
// recording; the session goes on.
func Start(dir string, meta Meta, command []string, withStdin bool) (*Recorder, error) {
	return start(dir, meta, command, withStdin, writeAsync)
}

// start is Start, with the file written as mode asks where it can be.
func start(dir string, meta Meta, command []string, withStdin bool, mode writeMode) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("recording directory: %w", err)
	}
	path := filepath.Join(dir, meta.AuditID+".cast")
	f, err := createFile(path, mode)
	if err != nil {
		return nil, fmt.Errorf("creating the recording: %w", err)
	}
	meta.Stdin = withStdin
	now := time.Now()
	r := &Recorder{path: path, start: now, stdin: withStdin,
		hdr: Header{Version: 2, Width: 80, Height: 24, Timestamp: now.Unix(), Command: strings.Join(command, " "),
			Title: meta.Namespace + "/" + meta.Pod + "/" + meta.Container, Env: map[string]string{"TERM": "xterm"}, Kubestream: meta},
		direct: f.direct, wake: make(chan struct{}, 1), done: make(chan error, 1)}
	if f.aio != nil {
		r.file = f
	} else {
		go r.write(f)
	}
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
// submits them (or wakes the writer) when there is writeSize to write (mu
// held), or stops the recording when the disk is too far behind. The
// string is encoded in pieces that fit the current block (an escaped byte
// takes at most 6), cut only between characters.
func (r *Recorder) event(kind byte, data []byte) {
	if r.queued+r.inflight() > MaxQueued {
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
	// bulk session a futex call and two context switches per frame, and
	// direct writes cost less CPU the larger they are.
	switch {
	case len(r.full)*blockSize >= writeSize:
		r.moved = true
		if r.file != nil {
			r.submit(false)
		} else {
			r.kick()
		}
	case r.armed:
	case r.flush == nil:
		r.flush = time.AfterFunc(flushDelay, r.flushTimer)
		r.armed = true
	default:
		r.flush.Reset(flushDelay)
		r.armed = true
	}
}

// flushTimer writes the current block (or hands it to the writer),
// flushDelay after an event, unless the session is busy: then its partial
// block goes out with the next writeSize, and writing it alone now would
// leave a block for the next write to wait for, or a page in the page
// cache for it to take out again (twenty times a second on a bulk
// session). The timer waits another flushDelay instead, so every event is
// on disk within twice flushDelay.
func (r *Recorder) flushTimer() {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
	case r.moved:
		r.moved = false
		r.flush.Reset(flushDelay)
	case r.file != nil:
		// Submitted, then collected at the next round, so that an idle
		// recording holds no block.
		r.submit(true)
		if len(r.file.inflight) > 0 || r.stopped == nil && (r.cur != nil || len(r.full) > 0) {
			r.flush.Reset(flushDelay)
		} else {
			r.armed = false
		}
	default:
		r.flushed = true
		r.kick()
	}
}

// room makes sure the current block has at least n bytes free (n is
// small), starting a new one if not (mu held). A filled block is cut where
// its last aligned block ends while the file takes direct I/O, the rest
// beginning the next.
func (r *Recorder) room(n int) {
	if r.cur != nil && cap(r.cur)-len(r.cur) >= n {
		return
	}
	next := append(getBlock(), r.carry...)
	r.queued += len(r.carry)
	r.carry = r.carry[:0]
	if r.cur != nil {
		k := r.cut()
		next = append(next, r.cur[k:]...)
		r.full = append(r.full, r.cur[:k])
	}
	r.cur = next
}

// cut is how much of cur a direct write may take: its aligned blocks.
func (r *Recorder) cut() int {
	if r.direct {
		return len(r.cur) &^ (align - 1)
	}
	return len(r.cur)
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

// cutAt is how many of data's bytes, at most max (at least utf8.UTFMax),
// end on a character's boundary: a JSON string cannot hold half of one. A
// run of continuation bytes too long to be a character's is invalid
// anyway, and cut where it is.
func cutAt(data []byte, max int) int {
	if len(data) <= max {
		return len(data)
	}
	for n := max; n > max-utf8.UTFMax; n-- {
		if utf8.RuneStart(data[n]) {
			return n
		}
	}
	return max
}

// flushDelay is how long an event may wait in a partial block when the
// session is quiet (twice that while it is busy: see flushTimer).
const flushDelay = 50 * time.Millisecond

// writeSize is how much is written at once while the session goes on:
// direct writes cost less CPU the larger they are (BenchmarkRecord's
// figures in docs/performance.md).
const writeSize = 1 << 20

// inflight is what the disk holds of the recording's blocks (mu held).
func (r *Recorder) inflight() int {
	if r.file == nil {
		return 0
	}
	return r.file.inflightBytes()
}

// submit is the writer's work where writes are asynchronous (mu held): it
// collects the completed writes and submits the filled blocks, and with
// all the current block too, its tail padded with zeros to an aligned
// block and carried into the next, which rewrites it. It never waits:
// while a padded block is being written the filled ones stay queued, since
// the next write begins in it, and while maxInflight writes are. After a
// failed write it writes no more; the error it stopped on is returned
// (Close's).
func (r *Recorder) submit(all bool) error {
	if err := r.file.collect(false); err != nil {
		r.stop(err)
		return err
	}
	if r.stopped != nil && !r.closed || r.file.padInFlight() || len(r.file.inflight) >= maxInflight {
		return nil
	}
	bufs := r.full
	r.full = nil
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	r.queued -= int(n)
	padded := false
	if all && r.cur != nil {
		k := r.cut()
		r.carry = append(r.carry[:0], r.cur[k:]...)
		switch {
		case len(r.cur) > k:
			b := r.cur[:k+align]
			clear(b[len(r.cur):]) // the block's last user's bytes must not reach this file
			bufs, padded = append(bufs, b), true
		case k > 0:
			bufs = append(bufs, r.cur)
		default:
			putBlock(r.cur)
		}
		n += int64(k)
		r.cur, r.queued = nil, 0
	}
	if len(bufs) == 0 {
		return nil
	}
	if err := r.file.submit(bufs, n, padded); err != nil {
		for _, b := range bufs {
			putBlock(b)
		}
		r.stop(err)
		return err
	}
	if padded {
		r.tails++
	}
	return nil
}

// stop ends the recording for err, the first one (mu held).
func (r *Recorder) stop(err error) {
	if r.stopped == nil {
		r.stopped = fmt.Errorf("recording stopped: %w", err)
	}
}

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

// take hands the writer the filled blocks and, after flushDelay or at
// Close, the current one (mu held): its aligned part as a block, the rest
// as tail, which is also where the next block begins (a direct write
// takes it again, whole). The writer owns tail's bytes until its next take.
func (r *Recorder) take(tail []byte) (full [][]byte, _ []byte) {
	full, r.full = r.full, nil
	tail = tail[:0]
	if !r.flushed && !r.closed {
		for _, b := range full {
			r.queued -= len(b)
		}
		return full, tail
	}
	r.flushed, r.armed = false, false
	if r.cur != nil {
		k := r.cut()
		tail = append(tail, r.cur[k:]...)
		r.carry = append(r.carry[:0], tail...)
		if k > 0 {
			full = append(full, r.cur[:k])
		} else {
			putBlock(r.cur) // only once its tail is copied: another recording may take it
		}
		r.cur = nil
	}
	r.queued = 0
	return full, tail
}

// write is the recording's writer: at each wake it takes the blocks filled
// so far and writes them, until Close. After a failed write it writes no
// more.
func (r *Recorder) write(f *file) {
	var tail []byte
	var werr error
	for open := true; open && werr == nil; {
		_, open = <-r.wake
		r.mu.Lock()
		var full [][]byte
		full, tail = r.take(tail)
		r.mu.Unlock()
		werr = f.write(full)
		wroteTail := werr == nil && len(tail) > 0
		if wroteTail {
			werr = f.writeTail(tail)
		}
		for _, b := range full {
			putBlock(b)
		}
		r.mu.Lock()
		if werr != nil {
			r.stop(werr)
		}
		r.direct = f.direct // a refused direct write turned it off
		if wroteTail {
			r.tails++
		}
		r.mu.Unlock()
	}
	for range r.wake { // until Close
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
	if r.file != nil {
		werr := r.finish()
		r.mu.Unlock()
		if werr != nil {
			return fmt.Errorf("writing the recording: %w", werr)
		}
		return stopped
	}
	close(r.wake)
	r.mu.Unlock()
	if werr := <-r.done; werr != nil {
		return fmt.Errorf("writing the recording: %w", werr)
	}
	return stopped
}

// finish writes what is left, waits for every write and cuts the file
// after the last byte written (Close, mu held, asynchronous writes).
func (r *Recorder) finish() error {
	f := r.file
	werr := f.collect(true) // a padded block, which the last write begins in
	if werr == nil {
		werr = r.submit(true)
	}
	if err := f.finish(f.off + int64(len(r.carry))); werr == nil {
		werr = err
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	return werr
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

// special8 has the high bit set in a byte of w's eight if that byte, or
// one before it, is a control character, a quote, a backslash or above
// ASCII: the classic "has a zero byte" word tricks (a byte below n, or
// equal to c, borrows in a subtraction). A borrow only starts at such a
// byte and only moves up, so the lowest byte set is the first such byte.
func special8(w uint64) uint64 {
	return ((w - ones*0x20) | (w ^ ones*'"' - ones) | (w ^ ones*'\\' - ones) | w) & highs
}

// appendJSONChars appends s as the inside of a JSON string: printable
// ASCII copied in runs, control characters, quote and backslash escaped,
// valid UTF-8 as is, invalid bytes as U+FFFD (as encoding/json does).
// Hand-written because it runs on every output frame of a recorded
// session: encoding/json's reflection and its []any cost a third of the
// session's throughput on a bulk tty transfer; this is one pass.
func appendJSONChars(b []byte, s []byte) []byte {
	start := 0 // s[start:i] is to be appended as it is
	for i := plainUntil(s, 0); i < len(s); i = plainUntil(s, i) {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			if r, size := utf8.DecodeRune(s[i:]); r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case c == '"' || c == '\\':
			b = append(append(b, s[start:i]...), '\\', c)
		case c == '\n':
			b = append(append(b, s[start:i]...), '\\', 'n')
		case c == '\r':
			b = append(append(b, s[start:i]...), '\\', 'r')
		case c == '\t':
			b = append(append(b, s[start:i]...), '\\', 't')
		default:
			b = append(append(b, s[start:i]...), '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	return append(b, s[start:]...)
}

// plainUntilWords is plainUntil in Go: the index of the first byte from i
// on that needs a second look (special8's), or len(s). Eight bytes at a
// time, the first such byte found in its word at once, and 32 at a time
// once a run has begun: a terminal's output is mostly printable ASCII in
// runs between escapes and line ends, which a first 32-byte test would
// only overshoot.
func plainUntilWords(s []byte, i int) int {
	for i+8 <= len(s) {
		if m := special8(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		for i += 8; i+32 <= len(s); i += 32 {
			w := s[i : i+32]
			if special8(binary.LittleEndian.Uint64(w))|special8(binary.LittleEndian.Uint64(w[8:]))|
				special8(binary.LittleEndian.Uint64(w[16:]))|special8(binary.LittleEndian.Uint64(w[24:])) != 0 {
				break
			}
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return i
		}
	}
	return i
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
