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
			if !p.holds(1, len(c.words)) || p.holds(3, 10) {
				t.Fatal("holds the wrong streams")
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
			if p.holds(3, 0) != c.dropped {
				t.Fatalf("data stream dropped: %v, want %v", p.holds(3, 0), c.dropped)
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
	if p.holds(1, pfSaidMax) {
		t.Fatal("held words past the limit")
	}
	if out := p.release(1); !bytes.Equal(out, appendData(nil, 1, []byte("abc"), false)) {
		t.Fatalf("released %x", out)
	}
}
