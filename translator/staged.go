package translator

import (
	"io"

	"github.com/kubestream/kubestream/internal/wire"
)

// staged is a byte stream read through a wire.Stage, as a spdy.Reader's
// source: headers and small payloads come through the stage, and a large
// payload read runs on into the room behind p, up to cap(p), the overflow
// (the next frame's header, most often) staged, so that the header costs
// no read of its own. The runtime's SPDY connection (spdyConn, the
// tunnel's down copy) and the client's tunnel messages (clientStream) are
// read so. Only the one reader goroutine touches it.
type staged struct {
	r  io.Reader
	st wire.Stage
}

func (s *staged) Read(p []byte) (int, error) {
	return s.st.Read(s.r, p[:cap(p)], len(p))
}

// Peek stages n bytes (at most wire.ReadBufSize).
func (s *staged) Peek(n int) ([]byte, error) {
	if err := s.st.Fill(s.r, n); err != nil {
		return nil, err
	}
	return s.st.Staged()[:n], nil
}

func (s *staged) Discard(n int) (int, error) { return s.st.Skip(s.r, n) }

func (s *staged) Buffered() int { return len(s.st.Staged()) }
