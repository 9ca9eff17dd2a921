// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"io"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/remotecommand"
)

// V5Reader reads a v5.channel.k8s.io client's messages: the one place that
// decides what a client may send (stdin while open, resizes with a tty, the
// close signal [255, channel]) for the translator and the runtime side
// alike. A session moves the bytes and sizes on; it never parses a
// client's channel byte itself. Only the session's read loop uses it.
type V5Reader struct {
	conn       *Conn
	stdinOpen  bool
	tty        bool // resizes allowed
	resizeOpen bool
	sizes      ResizeStream
	scratch    [2]byte // a channel byte, a close signal's channel
}

// maxResizeMessage bounds one resize message (a real one is ~30 bytes).
const maxResizeMessage = 4096

// NewV5Reader reads the client on c of a session with stdin open or not,
// with a tty or not.
func NewV5Reader(c *Conn, stdin, tty bool) *V5Reader {
	return &V5Reader{conn: c, stdinOpen: stdin, tty: tty, resizeOpen: tty}
}

// V5Message is one client message that asks something of the session;
// exactly one field is set.
type V5Message struct {
	// Stdin is data for the process's stdin: read it to its end (EOF)
	// before calling Next again. Its error other than EOF means the
	// message was cut off, and none of it is data.
	Stdin io.Reader
	// Sizes are the terminal sizes a resize message completed (none when
	// it carried the start of an object only); ResizeBytes its payload.
	Sizes       []TerminalSize
	ResizeBytes int
	// CloseStdin: the client closed stdin (the process reads EOF).
	// CloseResize: the client will send no more resizes.
	CloseStdin, CloseResize bool
}

// ReadStdin fills buf from a stdin message (V5Message.Stdin): as much as
// buf holds, or the rest of the message. A process's stdin then gets whole
// pieces, not the fragments single reads return (gorilla's stop at frame
// ends and buffer fills, a 4 KiB frame apart from its own client), each of
// which would be a write, a system call and a SPDY frame or FIFO write down
// the line. end reports the message's end; an error means the message was
// cut off, and then none of buf is data.
func ReadStdin(msg io.Reader, buf []byte) (n int, end bool, err error) {
	for n < len(buf) {
		k, err := msg.Read(buf[n:])
		n += k
		switch {
		case err == io.EOF:
			return n, true, nil
		case err != nil:
			return 0, true, err
		}
	}
	return n, false, nil
}

// Next reads messages until one that asks something of the session, and
// returns it. Empty messages and repeated close signals ask nothing. A
// client's breach of v5 is a *ProtocolError; a connection's end or broken
// framing is Conn's error.
func (v *V5Reader) Next() (V5Message, error) {
	for {
		mt, r, err := v.conn.NextReader()
		if err != nil {
			return V5Message{}, err
		}
		if mt != websocket.BinaryMessage {
			return V5Message{}, ProtocolErrorf("text message; v5 carries binary messages only")
		}
		if _, err := io.ReadFull(r, v.scratch[:1]); err != nil {
			if err == io.EOF {
				continue // an empty message says nothing
			}
			return V5Message{}, err
		}
		switch ch := v.scratch[0]; ch {
		case remotecommand.StreamStdIn:
			if !v.stdinOpen {
				return V5Message{}, ProtocolErrorf("data on stdin, which is not open")
			}
			return V5Message{Stdin: r}, nil
		case remotecommand.StreamResize:
			if !v.tty {
				return V5Message{}, ProtocolErrorf("resize without a tty")
			}
			if !v.resizeOpen {
				return V5Message{}, ProtocolErrorf("resize after the resize channel was closed")
			}
			return v.resize(r)
		case remotecommand.StreamClose:
			n, err := io.ReadFull(r, v.scratch[:2])
			if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
				return V5Message{}, err // cut off before its end: not a close signal
			}
			if n != 1 {
				return V5Message{}, ProtocolErrorf("close signal must be exactly [255, channel]")
			}
			switch v.scratch[0] {
			case remotecommand.StreamStdIn:
				if v.stdinOpen { // closing twice, or a stdin-less session: harmless
					v.stdinOpen = false
					return V5Message{CloseStdin: true}, nil
				}
			case remotecommand.StreamResize:
				if v.resizeOpen {
					v.resizeOpen = false
					return V5Message{CloseResize: true}, nil
				}
			default:
				return V5Message{}, ProtocolErrorf("close signal for channel %d, which a client cannot close", v.scratch[0])
			}
		default:
			return V5Message{}, ProtocolErrorf("unknown client channel %d", ch)
		}
	}
}

// resize reads one resize message through a pooled buffer: resizes are
// rare, and a held session keeps no buffer for them.
func (v *V5Reader) resize(r io.Reader) (V5Message, error) {
	bp := GetBuf(maxResizeMessage)
	defer PutBuf(bp)
	n, err := io.ReadFull(r, *bp)
	if err == nil {
		return V5Message{}, ProtocolErrorf("resize message larger than %d bytes", maxResizeMessage)
	}
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		return V5Message{}, err
	}
	sizes, err := v.sizes.Feed((*bp)[:n])
	if err != nil {
		return V5Message{}, err
	}
	return V5Message{Sizes: sizes, ResizeBytes: n}, nil
}
