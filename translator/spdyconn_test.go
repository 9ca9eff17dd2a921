// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"k8s.io/streaming/pkg/httpstream"
	k8sspdy "k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/kubestream/kubestream/internal/spdy"
	"github.com/kubestream/kubestream/internal/wire"
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
		srvConn, err = k8sspdy.NewServerConnection(c, func(s httpstream.Stream, replySent <-chan struct{}) error {
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
	sc := newSPDYConn(c, 0)
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
		if f.control && f.typ == spdy.TypeSynReply {
			replies++
		}
	}
	// client → server, then FIN
	buf := append(make([]byte, spdy.HeaderLen), "hello"...)
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

// chunkConn serves a byte stream in reads of at most chunk bytes, counting
// the reads, then io.EOF.
type chunkConn struct {
	net.Conn
	data  []byte
	chunk int
	reads int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	c.reads++
	n := copy(p[:min(len(p), c.chunk)], c.data)
	c.data = c.data[n:]
	return n, nil
}

// TestSPDYConnReads: the runtime reader's staging and run-on reads give
// back the stream byte for byte however the kernel cuts it, and a large
// payload with room behind it takes the next frame header in its own read.
func TestSPDYConnReads(t *testing.T) {
	stream := make([]byte, 3*40000)
	for i := range stream {
		stream[i] = byte(i * 7)
	}
	type op struct {
		n    int  // bytes to read, or to skip when skip is set
		skip bool // discard instead of read
		room int  // spare room behind the read buffer
	}
	ops := []op{{n: 8}, {n: 32768, room: wire.ReadBufSize}, {n: 8}, {n: 100, skip: true}, {n: 5000}, {n: 3}, {n: 40000, room: 10}, {n: 9000, skip: true}, {n: 8}}
	for _, chunk := range []int{1, 7, 4096, 4100, 65536, 1 << 20} {
		c := &chunkConn{data: stream, chunk: chunk}
		sc := newSPDYConn(c, 0)
		off := 0
		for i, o := range ops {
			if o.skip {
				if _, err := sc.src.Discard(o.n); err != nil {
					t.Fatalf("chunk %d op %d: discard: %v", chunk, i, err)
				}
				off += o.n
				continue
			}
			buf := make([]byte, o.n+o.room)
			if err := stagedReadFull(sc, buf[:o.n]); err != nil {
				t.Fatalf("chunk %d op %d: %v", chunk, i, err)
			}
			if string(buf[:o.n]) != string(stream[off:off+o.n]) {
				t.Fatalf("chunk %d op %d: wrong bytes at offset %d", chunk, i, off)
			}
			off += o.n
		}
		// The rest, then a clean EOF.
		rest := make([]byte, len(stream)-off)
		if err := stagedReadFull(sc, rest); err != nil || string(rest) != string(stream[off:]) {
			t.Fatalf("chunk %d: rest: %v", chunk, err)
		}
		if err := stagedReadFull(sc, make([]byte, 1)); err != io.EOF {
			t.Fatalf("chunk %d: at the end got %v, want io.EOF", chunk, err)
		}
	}

	// A frame header, a 32 KiB payload and the next header, all arrived:
	// two reads (stage the header, then payload plus the next header run
	// on), and the next header comes from the stage.
	frames := make([]byte, 8+32768+8)
	spdy.PutDataHeader(frames, 1, 32768, false)
	spdy.PutDataHeader(frames[8+32768:], 3, 100, false)
	c := &chunkConn{data: frames, chunk: 1 << 20}
	sc := newSPDYConn(c, 0)
	p := make([]byte, 32768, 32768+wire.ReadBufSize)
	if f, err := sc.next(); err != nil || f.length != len(p) {
		t.Fatalf("first frame %+v (%v)", f, err)
	}
	if err := sc.readPayload(p); err != nil {
		t.Fatal(err)
	}
	before := c.reads
	if f, err := sc.next(); err != nil || f.id != 3 || f.length != 100 {
		t.Fatalf("next header: %+v %v", f, err)
	}
	if c.reads != before {
		t.Errorf("the next header took a read of its own (%d reads)", c.reads)
	}

	// The stream ends inside a read.
	sc = newSPDYConn(&chunkConn{data: stream[:10], chunk: 4}, 0)
	if err := stagedReadFull(sc, make([]byte, 12)); err != io.ErrUnexpectedEOF {
		t.Errorf("short stream: got %v, want io.ErrUnexpectedEOF", err)
	}
	sc = newSPDYConn(&chunkConn{data: stream[:5000], chunk: 4096}, 0)
	if err := stagedReadFull(sc, make([]byte, 6000)); err != io.ErrUnexpectedEOF {
		t.Errorf("short large read: got %v, want io.ErrUnexpectedEOF", err)
	}
}

// stagedReadFull is io.ReadFull through the runtime reader's source, with
// p's room up to cap(p) open to a run-on read.
func stagedReadFull(sc *spdyConn, p []byte) error {
	for got := 0; got < len(p); {
		m, err := sc.src.Read(p[got:])
		got += m
		if err != nil && got < len(p) {
			return wire.EOFErr(got, err)
		}
	}
	return nil
}

// TestSPDYConnPingWhileAWriteIsBlocked: a runtime that stops reading
// while a write to it is under way, and pings: the reader answers without
// waiting for the blocked write (it goes on reading the runtime's
// output), the answer goes out once the runtime reads again, and a write
// the runtime never takes ends at the write timeout.
func TestSPDYConnPingWhileAWriteIsBlocked(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	sc := newSPDYConn(c, 2*time.Second)
	defer sc.Close()

	// Stdin to a runtime that reads nothing: the writer blocks in Write,
	// holding the write lock, until the timeout.
	wrote := make(chan error, 1)
	go func() {
		buf := make([]byte, spdy.HeaderLen+spdy.MaxData)
		for {
			if err := sc.writeData(1, buf, false); err != nil {
				wrote <- err
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond) // the socket buffers fill

	// The runtime pings, then writes stdout on stream 2.
	ping := append(spdy.AppendControl(nil, spdy.TypePing, 0, 4), 0, 0, 0, 2)
	data := make([]byte, spdy.HeaderLen+5)
	copy(data[spdy.HeaderLen:], "hello")
	spdy.PutDataHeader(data, 2, 5, false)
	if _, err := rt.Write(append(ping, data...)); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		f, err := sc.next()
		if err != nil || f.control || f.id != 2 {
			got <- fmt.Sprintf("frame %+v, %v", f, err)
			return
		}
		p := make([]byte, f.length)
		_ = sc.readPayload(p)
		got <- string(p)
	}()
	select {
	case s := <-got:
		if s != "hello" {
			t.Fatalf("after the ping: %s", s)
		}
	case <-time.After(time.Second):
		t.Fatal("the reader waited on the blocked write to answer a ping")
	}
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write the runtime never takes did not end at the write timeout")
	}
}

// TestSPDYConnAnswersPing: with no write under way, the runtime's PING is
// answered at once, by the reader itself.
func TestSPDYConnAnswersPing(t *testing.T) {
	c, rt := net.Pipe()
	defer rt.Close()
	sc := newSPDYConn(c, time.Second)
	defer sc.Close()
	ping := append(spdy.AppendControl(nil, spdy.TypePing, 0, 4), 0, 0, 0, 8)
	go func() { _, _ = rt.Write(ping) }()
	go func() { _, _ = sc.next() }() // ends when the connection closes
	got := make([]byte, len(ping))
	_ = rt.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(rt, got); err != nil || !bytes.Equal(got, ping) {
		t.Fatalf("answer %x, %v; want %x", got, err, ping)
	}
}
