package translator

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/remotecommand"
)

// TestFrameFollower: boundaries are found whatever the read sizes, across
// 7-bit, 16-bit and 64-bit lengths, and a close frame is noticed.
func TestFrameFollower(t *testing.T) {
	var stream []byte
	var ends []int // offsets where a frame ends
	for _, n := range []int{0, 5, 125, 126, 300, 65535, 65536, 70000} {
		stream = serverFrame(stream, websocket.BinaryMessage, make([]byte, n))
		ends = append(ends, len(stream))
	}
	withClose := serverFrame(append([]byte(nil), stream...), websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""))
	for _, chunk := range []int{1, 2, 3, 7, 100, 4096, 1 << 20} {
		var f frameFollower
		fed, next := 0, 0
		for fed < len(stream) {
			k := min(chunk, len(stream)-fed)
			f.follow(stream[fed : fed+k])
			fed += k
			for next < len(ends) && ends[next] < fed {
				next++
			}
			atEnd := next < len(ends) && ends[next] == fed
			if f.atBoundary() != atEnd {
				t.Fatalf("chunk %d, offset %d: atBoundary %v, want %v", chunk, fed, f.atBoundary(), atEnd)
			}
		}
		if f.sawClose {
			t.Fatalf("chunk %d: close seen in a stream without one", chunk)
		}
		var g frameFollower
		for i := 0; i < len(withClose); i += chunk {
			g.follow(withClose[i:min(i+chunk, len(withClose))])
		}
		if !g.sawClose || !g.atBoundary() {
			t.Fatalf("chunk %d: close frame not followed", chunk)
		}
	}
}

// TestEndFrames: what a client hears when the runtime could not say it.
func TestEndFrames(t *testing.T) {
	ops, payloads := serverFrames(t, endFrames(remotecommand.StreamProtocolV5Name, "container runtime connection lost"))
	if len(ops) != 2 || ops[0] != websocket.BinaryMessage || ops[1] != websocket.CloseMessage || payloads[0][0] != ChanError {
		t.Fatalf("v5: opcodes %v", ops)
	}
	var st metav1.Status
	if err := json.Unmarshal(payloads[0][1:], &st); err != nil || st.Reason != metav1.StatusReasonInternalError || st.Message != "container runtime connection lost" {
		t.Fatalf("v5 status %+v (%v)", st, err)
	}
	ops, payloads = serverFrames(t, endFrames(portforward.WebsocketsSPDYTunnelingPortForwardV1, string(bytes.Repeat([]byte("x"), 200))))
	if len(ops) != 1 || ops[0] != websocket.CloseMessage || binary.BigEndian.Uint16(payloads[0]) != websocket.CloseInternalServerErr || len(payloads[0]) > 125 {
		t.Fatalf("tunnel: opcodes %v, close payload %d bytes", ops, len(payloads[0]))
	}
}
