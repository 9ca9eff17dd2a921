package streaming

import (
	"io"
	"sync"
)

// stdinPipe carries the client's stdin to the process. The process's Read
// hands its own buffer to the session's reader (the handler's goroutine),
// which reads the client's message straight into it, so stdin is copied
// once, from the socket into the process's buffer; io.Pipe would copy it a
// second time, out of the reader's buffer. Backpressure is io.Pipe's:
// nothing is read from the client for stdin until the process asks.
//
// The process's side is Read (one reader at a time, as with any pipe); the
// session reader's side is feed and close, on the handler's goroutine only.
type stdinPipe struct {
	reqs  chan []byte      // the process's Read buffers, one at a time
	resps chan stdinResult // the answer to each

	closeOnce sync.Once
	closed    chan struct{} // closed once err is set
	err       error         // what Read returns once closed: io.EOF for the client's close signal

	goneOnce sync.Once
	gone     chan struct{} // the process's call returned: nobody reads any more

	pending []byte // the session reader's: a Read buffer not answered yet
}

type stdinResult struct {
	n   int
	err error
}

func newStdinPipe() *stdinPipe {
	return &stdinPipe{reqs: make(chan []byte), resps: make(chan stdinResult), closed: make(chan struct{}), gone: make(chan struct{})}
}

func (s *stdinPipe) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	select {
	case s.reqs <- p:
		r := <-s.resps
		return r.n, r.err
	case <-s.closed:
		return 0, s.err
	}
}

// feed reads one stdin message's payload into the process's buffers, as
// the process asks for them; a buffer the message did not fill is kept
// for the next message. errProcessDone: the process's call returned.
func (s *stdinPipe) feed(r io.Reader) error {
	for {
		if s.pending == nil {
			select {
			case s.pending = <-s.reqs:
			case <-s.gone:
				return errProcessDone
			}
		}
		n, err := r.Read(s.pending)
		if n > 0 {
			s.pending = nil
			s.resps <- stdinResult{n: n}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// close ends stdin: the process reads err (io.EOF after the client's close
// signal or its normal end). Later calls change nothing.
func (s *stdinPipe) close(err error) {
	s.closeOnce.Do(func() {
		s.err = err
		close(s.closed)
		if s.pending != nil {
			s.resps <- stdinResult{err: err}
			s.pending = nil
		}
	})
}

// processDone tells the session reader nobody reads stdin any more.
func (s *stdinPipe) processDone() { s.goneOnce.Do(func() { close(s.gone) }) }
