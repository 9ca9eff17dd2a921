// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestWriteInPlace: messages written with their header in the room in
// front of the payload are read back whole by gorilla's client, for each
// of the three header lengths (7-bit, 16-bit, 64-bit), over a real
// connection.
func TestWriteInPlace(t *testing.T) {
	sizes := []int{0, 1, 125, 126, 65535, 65536, 200000}
	payload := func(i, n int) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(i*7 + j)
		}
		return b
	}
	errc := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			errc <- err
			return
		}
		c := NewConn(ws, &Limits{PingPeriod: time.Minute, PongTimeout: time.Minute, WriteTimeout: 10 * time.Second,
			CloseGrace: time.Second, MaxMessageSize: 1 << 20})
		for i, n := range sizes {
			b := append(make([]byte, Headroom), payload(i, n)...)
			if err := c.WriteInPlace(b); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}))
	defer srv.Close()
	client, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	client.SetReadLimit(1 << 20)
	for i, n := range sizes {
		op, got, err := client.ReadMessage()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if op != websocket.BinaryMessage || !bytes.Equal(got, payload(i, n)) {
			t.Fatalf("message %d: type %d, %d bytes, want %d", i, op, len(got), n)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
