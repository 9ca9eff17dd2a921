package wire

import (
	"bufio"
	"net"
	"net/http"

	"github.com/kubestream/kubestream/internal/upgrade"
)

// Hijacker hands gorilla's Upgrader the connection with what the HTTP
// server had already buffered (a client may write its first frames in the
// same write as its handshake) put back in front of it, and the server's
// reader emptied onto that: kubestream's own frame reader reads the
// connection gorilla returns (NetConn), so nothing may stay behind in a
// buffer it never sees. gorilla still reuses the server's reader, so a
// session costs no new buffer.
type Hijacker struct{ http.ResponseWriter }

func (b Hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(b.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	c := upgrade.Unread(conn, brw.Reader)
	if c != conn {
		brw.Reader.Reset(c)
	}
	return c, brw, nil
}
