package translator

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// TestSPDYConnAgainstSpdystream: the hand-written client against the SPDY
// server runtimes use (k8s.io/streaming over spdystream): streams open
// with the right headers, data flows both ways, FIN half-closes.
func TestSPDYConnAgainstSpdystream(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	streams := make(chan httpstream.Stream, 10)
	var srvConn httpstream.Connection
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := l.Accept()
		if err != nil {
			return
		}
		srvConn, err = spdy.NewServerConnection(c, func(s httpstream.Stream, replySent <-chan struct{}) error {
			streams <- s
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc := newSPDYConn(c)
	defer sc.Close()
	kinds := []string{"error", "stdin", "stdout", "stderr", "resize"}
	ids := map[string]uint32{}
	for _, k := range kinds {
		id, err := sc.synStream("streamtype", k)
		if err != nil {
			t.Fatal(err)
		}
		ids[k] = id
	}
	got := map[string]httpstream.Stream{}
	for range kinds {
		select {
		case s := <-streams:
			got[s.Headers().Get("streamType")] = s
		case <-time.After(5 * time.Second):
			t.Fatalf("server saw only %d streams: %v", len(got), got)
		}
	}
	replies := 0
	for replies < len(kinds) {
		f, err := sc.next()
		if err != nil {
			t.Fatal(err)
		}
		if f.control && f.typ == spdyTypeSynReply {
			replies++
		}
	}
	// client → server, then FIN
	buf := append(make([]byte, spdyHeaderLen), "hello"...)
	if err := sc.writeData(ids["stdin"], buf, false); err != nil {
		t.Fatal(err)
	}
	if err := sc.finish(ids["stdin"]); err != nil {
		t.Fatal(err)
	}
	in, err := io.ReadAll(got["stdin"])
	if err != nil || string(in) != "hello" {
		t.Fatalf("server read %q %v", in, err)
	}
	// server → client
	go func() { _, _ = got["stdout"].Write([]byte("world")); got["stdout"].Close() }()
	f, err := sc.next()
	if err != nil || f.control || f.id != ids["stdout"] || f.length != 5 {
		t.Fatalf("frame %+v %v", f, err)
	}
	p := make([]byte, 5)
	if err := sc.readPayload(p); err != nil || string(p) != "world" {
		t.Fatalf("payload %q %v", p, err)
	}
	wg.Wait()
	srvConn.Close()
}

func TestSPDYBoundary(t *testing.T) {
	data := func(n int) []byte { // a data frame with n payload bytes
		return append([]byte{0, 0, 0, 1, 0, byte(n >> 16), byte(n >> 8), byte(n)}, make([]byte, n)...)
	}
	ping := []byte{0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1}
	cases := []struct {
		name   string
		pieces [][]byte
		want   []bool // atBoundary after each piece
	}{
		{"whole frames", [][]byte{data(10), ping}, []bool{true, true}},
		{"header in words, then payload", [][]byte{data(100)[:4], data(100)[4:8], data(100)[8:]}, []bool{false, false, true}},
		{"two frames in one piece", [][]byte{append(data(3), ping...)}, []bool{true}},
		{"frame and a half", [][]byte{append(data(3), ping[:5]...), ping[5:]}, []bool{false, true}},
		{"empty data frame", [][]byte{data(0)}, []bool{true}},
	}
	for _, tc := range cases {
		var b spdyBoundary
		for i, p := range tc.pieces {
			b.feed(p)
			if b.atBoundary() != tc.want[i] {
				t.Errorf("%s: piece %d: atBoundary %v, want %v", tc.name, i, b.atBoundary(), tc.want[i])
			}
		}
	}
}
