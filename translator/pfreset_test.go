// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"testing"

	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/connreset"
	"github.com/kubestream/kubestream/internal/spdy"
)

type countResets map[string]int

func (c countResets) ConnectionReset(reason string) { c[reason]++ }

// TestPFResets: the runtime's words on an error stream are held until it
// ends (a FIN, or cri-streaming's reset); a reset's words become the data
// stream's reset and an empty end, any other words pass unchanged, and the
// runtime's later frames on the data stream the node reset are dropped.
func TestPFResets(t *testing.T) {
	const resetWords = "error forwarding port 9000 to pod p, uid : read tcp 127.0.0.1:1->127.0.0.1:9000: read: connection reset by peer"
	const refused = "error forwarding port 9000 to pod p, uid : dial tcp 127.0.0.1:9000: connect: connection refused"
	rst := func(id uint32) []byte {
		b := spdy.AppendControl(nil, spdy.TypeRstStream, 0, 8)
		b = binary.BigEndian.AppendUint32(b, id)
		return binary.BigEndian.AppendUint32(b, spdy.StatusCancel)
	}
	for _, c := range []struct {
		name    string
		words   string
		viaRST  bool // the runtime ends the error stream with RST_STREAM, not a FIN
		want    []byte
		resets  int
		dropped bool
	}{
		{"reset, FIN", resetWords, false, append(rst(3), appendData(nil, 1, nil, true)...), 1, true},
		{"reset, RST", resetWords, true, rst(3), 1, true},
		{"refused, FIN", refused, false, appendData(nil, 1, []byte(refused), true), 0, false},
		{"refused, RST", refused, true, appendData(nil, 1, []byte(refused), false), 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			count := countResets{}
			p := newPFResets(klog.Background(), count)
			p.opened(1, http.Header{"Streamtype": {"error"}, "Requestid": {"0"}})
			p.opened(3, http.Header{"Streamtype": {"data"}, "Requestid": {"0"}})
			if hold, _ := p.data(1, len(c.words)); !hold {
				t.Fatal("the error stream's words not held")
			}
			if hold, _ := p.data(3, 10); hold {
				t.Fatal("the data stream held")
			}
			if out := p.said(1, []byte(c.words), false); out != nil {
				t.Fatalf("words passed before the stream ended: %q", out)
			}
			var got []byte
			if c.viaRST {
				before, drop := p.runtimeReset(1)
				if drop {
					t.Fatal("the error stream's reset dropped")
				}
				got = before
			} else {
				got = p.said(1, nil, true)
			}
			if !bytes.Equal(got, c.want) || count[connreset.Reset] != c.resets {
				t.Fatalf("sent %x, %v resets; want %x, %d", got, count, c.want, c.resets)
			}
			if hold, _ := p.data(3, 0); hold != c.dropped {
				t.Fatalf("data stream dropped: %v, want %v", hold, c.dropped)
			}
			if c.dropped {
				if out := p.said(3, nil, true); out != nil {
					t.Fatalf("the runtime's FIN on the reset data stream passed: %x", out)
				}
			}
		})
	}
	// Words past pfSaidMax pass as they come.
	p := newPFResets(klog.Background(), nil)
	p.opened(1, http.Header{"Streamtype": {"error"}})
	p.opened(3, http.Header{"Streamtype": {"data"}})
	p.said(1, []byte("abc"), false)
	hold, out := p.data(1, pfSaidMax)
	if hold || !bytes.Equal(out, appendData(nil, 1, []byte("abc"), false)) {
		t.Fatalf("past the limit: held %v, released %x", hold, out)
	}
	if hold, out := p.data(1, 10); hold || out != nil {
		t.Fatalf("after the release: held %v, sent %x", hold, out)
	}
}

// TestPFResetsClientFrames: the tunnel's header frames as FeedHeaders hands
// them over; one too large to hold (nil) loses the header stream without
// a panic, and the runtime's words pass unchanged from then on.
func TestPFResetsClientFrames(t *testing.T) {
	p := newPFResets(klog.Background(), nil)
	syn := func(id uint32, first bool, typ string) []byte {
		fixed := binary.BigEndian.AppendUint32(nil, id)
		return spdy.AppendHeaders(nil, spdy.TypeSynStream, append(fixed, 0, 0, 0, 0, 0, 0), first, "streamtype", typ, "requestid", "0")
	}
	p.clientFrame(syn(1, true, "error"))
	p.clientFrame(syn(3, false, "data"))
	if hold, _ := p.data(1, 10); !hold {
		t.Fatal("the error stream of a pair the client opened is not held")
	}
	p.clientFrame(nil)
	p.clientFrame(syn(5, false, "error"))
	if hold, _ := p.data(5, 10); hold {
		t.Fatal("held words after the header stream was lost")
	}
}
