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
