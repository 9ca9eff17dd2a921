// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawReader reads a plain TCP connection with read(2) inside the poller's
// callback (syscall.RawConn.Read), waiting on Go's poller when there is
// nothing to read: one callback bound for the session, so a read of a
// session's bulk input allocates nothing. Errors read as net.Conn's do.
type rawReader struct {
	conn *net.TCPConn
	rc   syscall.RawConn
	fn   func(uintptr) bool // read, bound once

	p   []byte        // read's buffer, for one Read
	n   int           // what read returned
	err syscall.Errno // and its error
}

// newSource is what a Conn reads from: conn itself, or a rawReader when it
// is plain TCP.
func newSource(conn net.Conn) io.Reader {
	tcp, ok := conn.(*net.TCPConn)
	if !ok {
		return conn
	}
	rc, err := tcp.SyscallConn()
	if err != nil {
		return conn
	}
	r := &rawReader{conn: tcp, rc: rc}
	r.fn = r.read
	return r
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.err = p, 0, 0
	err := r.rc.Read(r.fn)
	r.p = nil
	switch {
	case err != nil: // closed, or past the read deadline: the poller's error
		return 0, err
	case r.err != 0:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: r.conn.LocalAddr(), Addr: r.conn.RemoteAddr(), Err: os.NewSyscallError("read", r.err)}
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}

// read is Read's callback: false (wait for the poller) while the socket is
// empty.
func (r *rawReader) read(fd uintptr) bool {
	for {
		n, err := unix.Read(int(fd), r.p)
		e := errnoOf(err)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.n, r.err = max(n, 0), e
		return true
	}
}
