package translator

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"

	"k8s.io/streaming/pkg/httpstream"

	"github.com/kubestream/kubestream/internal/upgrade"
)

// UpgradeError is a runtime's refusal of an upgrade: its status and body.
type UpgradeError = upgrade.Error

// DialFunc opens a new upgraded connection to the runtime offering protocols
// and returns it with the protocol the runtime chose. CRI streaming URLs are
// single-use, so each call must come with a fresh URL.
type DialFunc func(ctx context.Context, protocols []string) (net.Conn, string, error)

// UpgradeSPDY dials a runtime streaming URL and performs the SPDY/3.1
// upgrade, returning the raw connection after the 101 and the protocol the
// runtime chose. The tunnel needs the raw bytes, not a parsed spdystream
// connection, and one dialer for both keeps the behaviour identical.
func UpgradeSPDY(ctx context.Context, u *url.URL, tlsConfig *tls.Config, protocols []string) (net.Conn, string, error) {
	h := http.Header{}
	h.Set(httpstream.HeaderConnection, httpstream.HeaderUpgrade)
	h.Set(httpstream.HeaderUpgrade, "SPDY/3.1")
	for _, p := range protocols {
		h.Add(httpstream.HeaderProtocolVersion, p)
	}
	conn, resp, err := upgrade.Dial(ctx, u, tlsConfig, http.MethodPost, h)
	if err != nil {
		return nil, "", err
	}
	return conn, resp.Header.Get(httpstream.HeaderProtocolVersion), nil
}
