// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestResizeStream: channel 4 is one JSON stream, as upstream reads it: an
// object split across messages applies when it completes; garbage, or an
// unfinished object past the bound, is a protocol error that applies
// nothing of its message.
func TestResizeStream(t *testing.T) {
	var r ResizeStream
	step := func(msg string) ([]TerminalSize, error) { return r.Feed([]byte(msg)) }
	if got, err := step(`{"Width":1`); err != nil || len(got) != 0 {
		t.Fatalf("first half: %v %v", got, err)
	}
	got, err := step(`23,"Height":45}{"Width":80,"Height":24} {"Wid`)
	if want := []TerminalSize{{123, 45}, {80, 24}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("second half: %v %v, want %v", got, err, want)
	}
	if got, err := step(`th":10,"Height":5}`); err != nil || !reflect.DeepEqual(got, []TerminalSize{{10, 5}}) {
		t.Fatalf("third message: %v %v", got, err)
	}
	var pe *ProtocolError
	if got, err := step(`{"Width":7,"Height":7}not json`); !errors.As(err, &pe) || got != nil {
		t.Fatalf("garbage after a good object: %v %v; want a protocol error and nothing applied", got, err)
	}
	var big ResizeStream
	if _, err := big.Feed([]byte(`{"Width":` + strings.Repeat(" ", maxResizePending))); !errors.As(err, &pe) {
		t.Fatalf("unbounded unfinished object: %v", err)
	}
}

func FuzzResizeStream(f *testing.F) {
	f.Add([]byte(`{"Width":1`), []byte(`23,"Height":45}`))
	f.Add([]byte(`{"Width":80,"Height":24}{"Width":1,"Height":2}`), []byte(` `))
	f.Add([]byte(`{"Width":"wide"}`), []byte(`}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var r ResizeStream
		if _, err := r.Feed(a); err != nil {
			return
		}
		_, _ = r.Feed(b)
		if len(r.pending) > maxResizePending {
			t.Fatalf("pending %d bytes", len(r.pending))
		}
	})
}
