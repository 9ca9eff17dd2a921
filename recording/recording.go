// Package recording writes terminal sessions (exec and attach with a tty)
// as asciicast v2 files, the format `asciinema play` replays: a JSON header
// line, then one JSON array per event, [seconds, "o"|"i"|"r", data].
//
// A recording never slows its session down to the disk's pace: events are
// copied into blocks bounded in bytes, then encoded and written by one
// goroutine per recording; when the buffer is full, or the disk refuses a write, the
// recording stops (and says why in Close's error), the session goes on.
package recording

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
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

// MaxQueued bounds the bytes a recording may have waiting for its writer.
const MaxQueued = 8 << 20

// blockSize is the unit the session copies frames into and the writer
// encodes and writes: one write syscall each, and no buffer ever grows
// (growing one copied every byte again and again on a bulk session).
const blockSize = 128 << 10

// spare keeps written blocks for the next ones, every recording's, up to
// maxSpare of them (MaxQueued's worth, kept for the process's life once a
// bulk recording has used them). Fresh memory costs a page fault per 4 KiB,
// which showed as a third of a bulk recording's cost when each recording
// allocated its own; a sync.Pool is emptied by every garbage collection,
// which a bulk session brings every few MiB.
var spare struct {
	sync.Mutex
	blocks [][]byte
}

const maxSpare = MaxQueued / blockSize

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

// A queued piece of an event is a 14-byte head, then its bytes:
//
//	kind (1) | flags (1) | nanoseconds since the start (8) | length (4)
//
// kindVerbatim pieces are written as they are (the header line); the
// others are event data, and pieceMore says the next piece is the same
// event's (an event is cut where a block ends, between characters).
const (
	pieceHead    = 14
	kindVerbatim = 'h'
	pieceMore    = 1
)

// errBehind stops a recording whose disk fell MaxQueued behind its session.
var errBehind = errors.New("recording stopped: the disk could not keep up with the session")

// Recorder records one session; its methods are translator.Observer's.
//
// The goroutine that forwards a frame only copies it, as it is, into the
// recording's current block; the recording's writer goroutine takes the
// filled blocks, encodes their events into JSON and writes them. Encoding
// on the forwarding goroutine put its cost on the session's critical path
// and cost a bulk tty session a quarter of its throughput; a copy is a
// memmove, and the encoding runs beside the session on another core.
type Recorder struct {
	path  string
	start time.Time
	hdr   Header
	stdin bool
	wake  chan struct{} // one slot: there are bytes to write; closed by Close
	done  chan error

	mu      sync.Mutex  // guards the fields below, taken by both session goroutines and the writer
	full    [][]byte    // queued pieces the writer has not taken yet, in order
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
		r.queue(kindVerbatim, 0, append(h, '\n'))
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

// event queues an event's bytes and wakes the writer (mu held), or stops
// the recording when the writer is too far behind.
func (r *Recorder) event(kind byte, data []byte) {
	if r.queued > MaxQueued {
		r.stopped = errBehind
		return
	}
	r.queue(kind, time.Since(r.start), data)
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

// queue copies data into the blocks as pieces that fit them, cut only
// between characters (mu held).
func (r *Recorder) queue(kind byte, at time.Duration, data []byte) {
	for {
		if cap(r.cur)-len(r.cur) < pieceHead+utf8.UTFMax {
			if len(r.cur) > 0 {
				r.full = append(r.full, r.cur)
			}
			r.cur = getBlock()
		}
		n := cutAt(data, cap(r.cur)-len(r.cur)-pieceHead)
		var flags byte
		if n < len(data) {
			flags = pieceMore
		}
		b := append(r.cur, kind, flags)
		b = binary.LittleEndian.AppendUint64(b, uint64(at))
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		r.cur = append(b, data[:n]...)
		r.queued += pieceHead + n
		if data = data[n:]; len(data) == 0 {
			return
		}
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

// take hands the writer every queued block (mu held).
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

// write is the recording's writer: at each wake it takes the blocks queued
// so far, encodes their events and writes them, until Close.
func (r *Recorder) write(f *os.File) {
	e := encoder{f: f, out: getBlock()}
	for open := true; open; {
		_, open = <-r.wake
		r.mu.Lock()
		in := r.take()
		r.mu.Unlock()
		for _, b := range in {
			e.pieces(b)
		}
		// Long plain runs are written from the taken blocks themselves:
		// they go back to the pool only once written.
		e.flush()
		for _, b := range in {
			putBlock(b)
		}
		if e.err != nil {
			r.mu.Lock()
			if r.stopped == nil {
				r.stopped = fmt.Errorf("recording stopped: %w", e.err)
			}
			r.mu.Unlock()
		}
	}
	putBlock(e.out)
	err := e.err
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	r.done <- err
}

// gatherMin is the shortest run of plain bytes the writer sends from where
// the session copied it instead of copying it once more: below it, a copy
// costs less than another piece of the write.
const gatherMin = 4 << 10

// maxSegs bounds a write's pieces (the kernel's IOV_MAX is 1024).
const maxSegs = 256

// encoder turns queued pieces into asciicast lines: heads, tails and
// escaped text in out, long plain runs (a bulk transfer's) left where they
// are, and writes them in order, one writev for up to maxSegs of them. The
// writer goroutine owns it.
type encoder struct {
	f       *os.File
	out     []byte   // encoded bytes not written yet
	mark    int      // out[:mark] is in segs already
	segs    [][]byte // what the next write sends, in order
	inEvent bool     // the last piece said the event goes on
	err     error
}

// pieces encodes every piece of block b.
func (e *encoder) pieces(b []byte) {
	for len(b) >= pieceHead {
		kind, flags := b[0], b[1]
		at := time.Duration(binary.LittleEndian.Uint64(b[2:]))
		n := int(binary.LittleEndian.Uint32(b[10:]))
		data := b[pieceHead : pieceHead+n : pieceHead+n]
		b = b[pieceHead+n:]
		if kind == kindVerbatim {
			e.copyOut(data)
			continue
		}
		if !e.inEvent {
			e.room(48)
			e.out = appendEventHead(e.out, at.Seconds(), kind)
		}
		e.chars(data)
		if e.inEvent = flags&pieceMore != 0; !e.inEvent {
			e.room(3)
			e.out = append(e.out, '"', ']', '\n')
		}
	}
}

// chars encodes data as the inside of a JSON string.
func (e *encoder) chars(data []byte) {
	for len(data) > 0 {
		// An escaped byte takes at most 6: what fits in out, cut between
		// characters.
		e.room(64)
		n := cutAt(data, (cap(e.out)-len(e.out))/6)
		var from, to int
		e.out, from, to = escape(e.out, data[:n], gatherMin)
		if from == n {
			data = data[n:]
			continue
		}
		if to == n { // the run may go on past the cut
			to = plainUntil(data, n)
		}
		e.gather(data[from:to])
		data = data[to:]
	}
}

func (e *encoder) copyOut(p []byte) {
	for len(p) > 0 {
		e.room(1)
		n := copy(e.out[len(e.out):cap(e.out)], p)
		e.out, p = e.out[:len(e.out)+n], p[n:]
	}
}

// gather adds p, which stays where it is until the next flush, to the
// write after what out holds so far.
func (e *encoder) gather(p []byte) {
	if e.mark < len(e.out) {
		e.segs = append(e.segs, e.out[e.mark:len(e.out):len(e.out)])
		e.mark = len(e.out)
	}
	e.segs = append(e.segs, p)
	if len(e.segs) >= maxSegs-1 {
		e.flush()
	}
}

// room writes everything pending unless out has n bytes free.
func (e *encoder) room(n int) {
	if cap(e.out)-len(e.out) < n {
		e.flush()
	}
}

// flush writes everything pending, in order; after a failed write nothing
// more is written.
func (e *encoder) flush() {
	if e.mark < len(e.out) {
		e.segs = append(e.segs, e.out[e.mark:len(e.out):len(e.out)])
	}
	if e.err == nil {
		e.err = writeAll(e.f, e.segs)
	}
	clear(e.segs)
	e.segs, e.out, e.mark = e.segs[:0], e.out[:0], 0
}

// writeAll writes segs in order: one writev (the os package has none for
// files), again from where a short one stopped.
func writeAll(f *os.File, segs [][]byte) error {
	if len(segs) == 1 {
		_, err := f.Write(segs[0])
		return err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	for len(segs) > 0 {
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Writev(int(fd), segs)
			return werr != unix.EAGAIN
		}); err != nil {
			return err
		}
		if werr == unix.EINTR {
			continue
		}
		if werr != nil {
			return &os.PathError{Op: "writev", Path: f.Name(), Err: werr}
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		for n > 0 && len(segs) > 0 {
			if n < len(segs[0]) {
				segs[0] = segs[0][n:]
				break
			}
			n -= len(segs[0])
			segs = segs[1:]
		}
	}
	return nil
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
// byte, so special8 is exact about whether there is one; where is left to
// a byte at a time.
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
	b, _, _ = escape(b, s, 0)
	return b
}

// escape is appendJSONChars that stops, if run > 0, before the first run
// of at least run plain bytes (s[from:to], which needs no escaping and is
// not appended). Without one, from and to are len(s).
func escape(b []byte, s []byte, run int) (_ []byte, from, to int) {
	start := 0 // s[start:i] is to be appended as it is
	for i := plainUntil(s, 0); ; i = plainUntil(s, i) {
		if run > 0 && i-from >= run {
			return append(b, s[start:from]...), from, i
		}
		if i == len(s) {
			return append(b, s[start:]...), len(s), len(s)
		}
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			if r, size := utf8.DecodeRune(s[i:]); r != utf8.RuneError || size != 1 {
				i += size
				from = i
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
		start, from = i, i
	}
}

// plainUntil is the index of the first byte from i on that needs a second
// look (special8's), or len(s). Eight bytes at a time, the first such byte
// found in its word at once, and 32 at a time once a run has begun: a
// terminal's output is mostly printable ASCII in runs between escapes and
// line ends, which a first 32-byte test would only overshoot.
func plainUntil(s []byte, i int) int {
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
