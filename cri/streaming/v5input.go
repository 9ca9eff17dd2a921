// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"errors"
	"io"

	"github.com/kubestream/kubestream/internal/wire"
)

// errProcessDone ends the client's stdin once the runtime's call returned:
// what the client still sends has no reader.
var errProcessDone = errors.New("process ended")

// readV5 carries the client's messages (wire.V5Reader decides what each
// asks) to the process until the client's close, an error, or the grace
// after the session's status. stdin and resize are nil when the session
// has none.
func readV5(wc *wire.Conn, stdin *io.PipeWriter, resize chan TerminalSize, size int) error {
	in := wire.NewV5Reader(wc, stdin != nil, resize != nil)
	for {
		m, err := in.Next()
		if err != nil {
			return err
		}
		switch {
		case m.Stdin != nil:
			if err = copyStdin(stdin, m.Stdin, size); errors.Is(err, errProcessDone) {
				// The process is gone; what is left has no reader.
				_, err = io.Copy(io.Discard, m.Stdin)
			}
			if err != nil {
				return err
			}
		case m.CloseStdin:
			stdin.Close() // the process reads EOF
		case m.CloseResize:
		default:
			for _, sz := range m.Sizes {
				// Keep the latest size, never block the reader on a
				// runtime that reads resizes slowly (or not at all).
				select {
				case resize <- TerminalSize{Width: sz.Width, Height: sz.Height}:
				default:
					select {
					case <-resize:
					default:
					}
					resize <- TerminalSize{Width: sz.Width, Height: sz.Height}
				}
			}
		}
	}
}

// copyStdin hands one stdin message to the process through a pooled buffer,
// a whole message (or BufferSize of a larger one) per write
// (wire.ReadStdin): the runtime writes what it is handed to the process's
// FIFO as it comes. io.Copy would allocate a buffer per message, and a
// quiet session holds none.
func copyStdin(stdin *io.PipeWriter, r io.Reader, size int) error {
	bp := wire.GetBuf(size)
	defer wire.PutBuf(bp)
	for {
		n, end, err := wire.ReadStdin(r, *bp)
		if err != nil {
			return err // cut off: none of it is data
		}
		if n > 0 {
			if _, err := stdin.Write((*bp)[:n]); err != nil {
				return err
			}
		}
		if end {
			return nil
		}
	}
}
