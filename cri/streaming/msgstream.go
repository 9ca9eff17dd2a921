package streaming

import (
	"errors"
	"fmt"
	"io"

	"github.com/gorilla/websocket"

	"github.com/kubestream/kubestream/internal/wire"
)

// msgStream is the client's binary messages as one byte stream: SPDY frames
// may be cut anywhere between messages (client-go writes a frame's header
// and payload as separate messages).
type msgStream struct {
	wc  *wire.Conn
	msg io.Reader
}

func (m *msgStream) Read(p []byte) (int, error) {
	for {
		if m.msg == nil {
			mt, r, err := m.wc.NextReader()
			if err != nil {
				return 0, err
			}
			if mt != websocket.BinaryMessage {
				return 0, tunnelErrf("tunnel carries binary messages only, got type %d", mt)
			}
			m.msg = r
		}
		n, err := m.msg.Read(p)
		if err == io.EOF {
			m.msg = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

var errTunnelProtocol = errors.New("port-forward tunnel")

func tunnelErrf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errTunnelProtocol}, a...)...)
}
