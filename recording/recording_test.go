package recording

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
		line := appendEvent(nil, event{at: 1.5, kind: "o", data: []byte(s)})
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
