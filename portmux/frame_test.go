// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	frames := []Frame{
		{Type: TypeReady, Port: 8080},
		{Type: TypeOpen, ID: 7, Port: 80, Payload: []byte("127.0.0.1:5555")},
		{Type: TypeOpen, ID: 8, Port: 80},
		{Type: TypeData, ID: 1, Payload: bytes.Repeat([]byte{0xaa}, MaxData)},
		{Type: TypeCloseWrite, ID: 1},
		{Type: TypeReset, ID: 2, Payload: []byte("connection reset by peer")},
		{Type: TypeWindow, ID: 3, Credit: Window},
		{Type: TypeError, Payload: []byte("pod default/demo was deleted")},
		{Type: TypeError, ID: 4, Payload: []byte("dial tcp: refused")},
		{Type: TypeAssocOpen, ID: 9, Port: 53},
		{Type: TypeDatagram, ID: 9},
		{Type: TypeDatagram, ID: 9, Payload: make([]byte, MaxDatagram)},
		{Type: TypeAssocClose, ID: 9, Payload: []byte("idle timeout")},
	}
	for _, f := range frames {
		b := f.Append(nil)
		g, _, err := ReadFrame(bytes.NewReader(b), nil)
		if err != nil {
			t.Fatalf("%+v: %v", f.Type, err)
		}
		if g.Type != f.Type || g.ID != f.ID || g.Port != f.Port || g.Credit != f.Credit || !bytes.Equal(g.Payload, f.Payload) {
			t.Fatalf("round trip of type 0x%02x changed it", byte(f.Type))
		}
	}
}

func TestFrameRejects(t *testing.T) {
	bad := map[string][]byte{
		"short":            {byte(TypeData), 0, 0},
		"oversize":         append(Frame{Type: TypeDatagram, ID: 1}.Append(nil), make([]byte, MaxDatagram+1)...),
		"ready with id":    {byte(TypeReady), 0, 0, 0, 1, 0, 80},
		"data id 0":        {byte(TypeData), 0, 0, 0, 0, 1},
		"empty data":       {byte(TypeData), 0, 0, 0, 1},
		"port 0":           {byte(TypeAssocOpen), 0, 0, 0, 1, 0, 0},
		"window 0":         {byte(TypeWindow), 0, 0, 0, 1, 0, 0, 0, 0},
		"window too big":   Frame{Type: TypeWindow, ID: 1, Credit: Window + 1}.Append(nil),
		"close-write body": {byte(TypeCloseWrite), 0, 0, 0, 1, 1},
		"unknown type":     {0x42, 0, 0, 0, 1},
		"long reason":      append([]byte{byte(TypeReset), 0, 0, 0, 1}, strings.Repeat("x", maxText+1)...),
	}
	for name, b := range bad {
		if _, _, err := ReadFrame(bytes.NewReader(b), nil); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: err %v, want ErrFrame", name, err)
		}
	}
}

// FuzzParseFrame: any bytes either parse into a frame that encodes back
// to the same bytes, or are refused with ErrFrame; never a panic, never
// more than MaxFrame+1 bytes read.
func FuzzParseFrame(f *testing.F) {
	for _, s := range []Frame{{Type: TypeReady, Port: 1}, {Type: TypeOpen, ID: 1, Port: 2, Payload: []byte("a:1")},
		{Type: TypeData, ID: 1, Payload: []byte("x")}, {Type: TypeWindow, ID: 1, Credit: 1}, {Type: TypeCloseWrite, ID: 2},
		{Type: TypeReset, ID: 3, Payload: []byte("r")}, {Type: TypeError, Payload: []byte("e")}, {Type: TypeAssocOpen, ID: 4, Port: 53},
		{Type: TypeDatagram, ID: 4, Payload: []byte{0}}, {Type: TypeAssocClose, ID: 4}} {
		f.Add(s.Append(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, _, err := ReadFrame(bytes.NewReader(b), nil)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v is not ErrFrame", err)
			}
			return
		}
		if out := fr.Append(nil); !bytes.Equal(out, b) {
			t.Fatalf("re-encoded %x, read %x", out, b)
		}
	})
}
