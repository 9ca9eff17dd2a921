// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package spdy

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"

	spdystream "github.com/moby/spdystream/spdy"
)

// TestDictionary: the dictionary is the one spdystream's framer announces
// (its Adler-32 in the zlib prefix), the prefix the one it writes.
func TestDictionary(t *testing.T) {
	var buf bytes.Buffer
	f, err := spdystream.NewFramer(&buf, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFrame(&spdystream.SynStreamFrame{StreamId: 1, Headers: http.Header{"A": {"b"}}}); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()[HeaderLen+SynStreamFixed:][:6]
	if !bytes.Equal(got, zlibPrefix[:]) {
		t.Fatalf("spdystream's header stream opens with %x, ours with %x", got, zlibPrefix)
	}
	if len(dictionary) != 1423 {
		t.Fatalf("dictionary of %d bytes", len(dictionary))
	}
}

// TestHeadersBothWays: blocks written here decode with spdystream's framer,
// and blocks spdystream's framer compresses (with real back references into
// the dictionary and earlier blocks) decode here, across several frames of
// one stream.
func TestHeadersBothWays(t *testing.T) {
	var buf bytes.Buffer
	for i, kv := range [][]string{{"streamtype", "error", "port", "80"}, {"streamtype", "data", "port", "80"}} {
		buf.Write(AppendHeaders(nil, TypeSynStream, []byte{0, 0, 0, byte(2*i + 1), 0, 0, 0, 0, 0, 0}, i == 0, kv...))
	}
	f, err := spdystream.NewFramer(&bytes.Buffer{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"error", "data"} {
		fr, err := f.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if got := fr.(*spdystream.SynStreamFrame).Headers.Get("Streamtype"); got != want {
			t.Fatalf("spdystream read streamtype %q, want %q", got, want)
		}
	}

	var out bytes.Buffer
	w, err := spdystream.NewFramer(&out, &out)
	if err != nil {
		t.Fatal(err)
	}
	want := []http.Header{
		{"Streamtype": {"error"}, "Port": {"8080"}, "Requestid": {"0"}},
		{"Streamtype": {"data"}, "Port": {"8080"}, "Requestid": {"0"}},
		{"Streamtype": {"error"}, "Port": {"8080"}, "Requestid": {"1"}, "Multi": {"a", "b"}},
	}
	var d HeaderDecoder
	for i, h := range want {
		out.Reset()
		if err := w.WriteFrame(&spdystream.SynStreamFrame{StreamId: spdystream.StreamId(2*i + 1), Headers: h}); err != nil {
			t.Fatal(err)
		}
		got, err := d.Decode(out.Bytes()[HeaderLen+SynStreamFixed:])
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, h) {
			t.Fatalf("block %d: %v, want %v", i, got, h)
		}
	}
}

// TestDecodeLimits: a block that would expand past the limits is refused
// before it is allocated, and a broken one is an error.
func TestDecodeLimits(t *testing.T) {
	var many []string
	for range MaxHeaderFields + 1 {
		many = append(many, "x", "y")
	}
	for name, block := range map[string][]byte{
		"long value":  AppendHeaderBlock(nil, true, "a", string(make([]byte, MaxHeaderField+1))),
		"upper case":  AppendHeaderBlock(nil, true, "Port", "80"),
		"many fields": AppendHeaderBlock(nil, true, many...),
		"no prefix":   AppendHeaderBlock(nil, false, "port", "80"),
		"cut":         AppendHeaderBlock(nil, true, "port", "80")[:12],
	} {
		var d HeaderDecoder
		if _, err := d.Decode(block); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzHeaderDecoder: arbitrary header blocks, one after another on one
// stream, end in an error or headers within the limits, never a panic or
// an allocation past them.
func FuzzHeaderDecoder(f *testing.F) {
	f.Add(AppendHeaderBlock(nil, true, "port", "80"), AppendHeaderBlock(nil, false, "streamtype", "data"))
	f.Add(AppendHeaderBlock(nil, true), []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var d HeaderDecoder
		for _, block := range [][]byte{a, b} {
			h, err := d.Decode(block)
			if err != nil {
				return
			}
			if len(h) > MaxHeaderFields {
				t.Fatalf("%d fields", len(h))
			}
		}
	})
}
