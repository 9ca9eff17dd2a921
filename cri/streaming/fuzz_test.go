// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/internal/wire"
	"github.com/kubestream/kubestream/internal/wiretest"
)

// FuzzV5Client: the runtime side's reading of a v5 client (frames,
// channels, resize JSON, close signals) against arbitrary bytes ends with an
// error, never a panic or a hang.
func FuzzV5Client(f *testing.F) {
	cat := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	for _, s := range [][]byte{
		wiretest.MaskedFrame(true, 2, []byte{0, 'h', 'i'}),
		cat(wiretest.MaskedFrame(true, 2, []byte{0, 'x'}), wiretest.MaskedFrame(true, 2, []byte{255, 0})),
		wiretest.MaskedFrame(true, 2, []byte("\x04{\"Width\":80,\"Height\":24}")),
		cat(wiretest.MaskedFrame(false, 2, []byte("\x04{\"Width\":1")), wiretest.MaskedFrame(true, 0, []byte("23,\"Height\":45}"))),
		wiretest.MaskedFrame(true, 8, websocket.FormatCloseMessage(1000, "")),
		wiretest.MaskedFrame(true, 2, []byte{255, 4}),
	} {
		f.Add(s)
	}
	limits := DefaultLimits().wire(0)
	f.Fuzz(func(t *testing.T, data []byte) {
		wc := wire.NewConn(wiretest.ServerWS(t, &wiretest.LoopConn{Src: data}, 0), &limits)
		pr, pw := io.Pipe()
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		resize := make(chan TerminalSize, 1)
		done := make(chan error, 1)
		go func() {
			done <- readV5(wc, pw, resize, 4096)
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("the read loop ended without an error")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the read loop hung")
		}
		pr.Close()
	})
}
