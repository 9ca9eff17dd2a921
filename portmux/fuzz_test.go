// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package portmux

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// FuzzNodeFrames feeds the node end sequences of frames (each input is
// frames with a 2-byte length before each), on a UDP session with a real
// pod port and a client that does not read: whatever the sequence, the
// session ends when the client goes, its goroutines go with it, and the
// heap stays within a bound.
func FuzzNodeFrames(f *testing.F) {
	seq := func(frames ...Frame) []byte {
		var b []byte
		for _, fr := range frames {
			e := fr.Append(nil)
			b = binary.BigEndian.AppendUint16(b, uint16(len(e)))
			b = append(b, e...)
		}
		return b
	}
	f.Add(seq(Frame{Type: TypeAssocOpen, ID: 1, Port: 9}, Frame{Type: TypeDatagram, ID: 1, Payload: []byte("x")}))
	f.Add(seq(Frame{Type: TypeAssocOpen, ID: 1, Port: 7}, Frame{Type: TypeAssocOpen, ID: 2, Port: 7}, Frame{Type: TypeAssocOpen, ID: 3, Port: 7}))
	f.Add(seq(Frame{Type: TypeAssocOpen, ID: 2, Port: 9}, Frame{Type: TypeAssocOpen, ID: 2, Port: 9}))
	f.Add(seq(Frame{Type: TypeAssocOpen, ID: 1, Port: 9}, Frame{Type: TypeAssocClose, ID: 1}, Frame{Type: TypeDatagram, ID: 1, Payload: []byte("late")}))
	f.Add(seq(Frame{Type: TypeData, ID: 4, Payload: []byte("x")}, Frame{Type: TypeError, Payload: []byte("\x1b[31mbye\n")}))
	f.Fuzz(func(t *testing.T, in []byte) {
		base := runtime.NumGoroutine()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		port := udpEcho(t)
		ws, res := rawNode(t, NodeConfig{UDPPorts: []uint16{port, 9}, UDP: loopDialer{}, MaxConns: 4})
		for len(in) >= 2 {
			n := int(binary.BigEndian.Uint16(in))
			in = in[2:]
			if n > len(in) {
				n = len(in)
			}
			if ws.WriteMessage(websocket.BinaryMessage, in[:n]) != nil {
				break
			}
			in = in[n:]
		}
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		ws.Close()
		waitResult(t, res)
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 64<<20 {
			t.Fatalf("heap grew by %d bytes in one session", grew)
		}
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > base+4 { // the test's HTTP server's own may linger a moment
			if time.Now().After(deadline) {
				t.Fatalf("%d goroutines after the session, %d before", runtime.NumGoroutine(), base)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
