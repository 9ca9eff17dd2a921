// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxSplice is the most one chunk moves: a pipe's default capacity (16
// pages), so the Conn's own pipe always takes a whole chunk.
const maxSplice = 64 << 10

// spliceFrom is ReadFromChannel's kernel path: splice(2) moves a chunk from
// src into a pipe of the session's own (the length it returns is the frame's),
// the frame header is sent with MSG_MORE (one segment with the data), and a
// second splice moves the chunk from the pipe into the socket. No byte of
// output passes through user memory. Hand-written: Go's own splice (in
// net.TCPConn.ReadFrom) copies sockets and files as they are and cannot put
// a frame header in front of bytes it never shows, nor can gorilla.
//
// ok is false, with nothing read, when the path does not apply: src has no
// file descriptor or is not a pipe, the connection is not plain TCP (TLS
// must see every byte), a pipe cannot be made, or the kernel refuses the
// first splice.
func (c *Conn) spliceFrom(ch byte, src io.Reader, size int) (n int64, ok bool, err error) {
	if !c.plain {
		return 0, false, nil
	}
	sc, isConn := src.(syscall.Conn)
	if !isConn {
		return 0, false, nil
	}
	in, err := sc.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	blocking, isPipe := pipeMode(in)
	if !isPipe {
		return 0, false, nil
	}
	out, err := c.nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	// The write end blocks: the kernel makes a splice non-blocking when
	// either end is, and a blocking src must block. It is empty whenever
	// data is spliced in, so only src's emptiness can make a splice wait.
	var p [2]int
	if unix.Pipe2(p[:], unix.O_CLOEXEC) != nil {
		return 0, false, nil
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	s := &splicer{r: p[0], w: p[1], size: min(size, maxSplice), blocking: blocking}
	// Bound once: the poller's callbacks, taken per chunk, allocate nothing.
	fill, drain := s.fill, s.drain
	for {
		m, err := s.spliceIn(in, fill)
		if n == 0 && (err == unix.EINVAL || err == unix.ENOSYS) {
			return 0, false, nil // this source cannot be spliced; nothing was taken from it
		}
		if err != nil || m == 0 { // 0: the writers closed (EOF)
			return n, true, err
		}
		if err := c.writeSpliced(ch, out, s, drain, m); err != nil {
			return n, true, err
		}
		n += int64(m)
	}
}

// pipeMode tells whether fd is a pipe or FIFO, and whether it is in
// blocking mode (os.NewFile of a blocking descriptor: Go's poller does not
// watch it, so a splice there must block rather than wait on the poller).
func pipeMode(rc syscall.RawConn) (blocking, isPipe bool) {
	_ = rc.Control(func(fd uintptr) { // a closed descriptor: neither, and the copy path says why
		var st unix.Stat_t
		if unix.Fstat(int(fd), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			return
		}
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			return
		}
		isPipe, blocking = true, fl&unix.O_NONBLOCK == 0
	})
	return blocking, isPipe
}

// splicer is one spliceFrom's state: its pipe, and what the poller's
// callbacks (fill, drain) hand back, kept here so that a chunk costs no
// allocation.

type splicer struct {
	r, w     int  // the pipe's read and write ends
	size     int  // the most a chunk moves
	blocking bool // src is a blocking descriptor: fill waits in the kernel

	m    int           // fill: bytes moved into the pipe
	hdr  []byte        // drain: the header still to send
	left int           // drain: payload bytes still in the pipe
	err  syscall.Errno // the last call's error
}

// spliceIn moves up to s.size bytes from src into the (empty) pipe,
// waiting on Go's poller until some are there or the writers are gone.
func (s *splicer) spliceIn(src syscall.RawConn, fill func(uintptr) bool) (int, error) {
	s.m, s.err = 0, 0
	if err := src.Read(fill); err != nil {
		return 0, err
	}
	if s.err != 0 {
		return 0, s.err
	}
	return s.m, nil
}

// fill is spliceIn's callback: false (wait for the poller) while src is
// empty.
func (s *splicer) fill(fd uintptr) bool {
	flags := unix.SPLICE_F_NONBLOCK
	if s.blocking {
		flags = 0
	}
	for {
		m, err := splice(int(fd), s.w, s.size, flags)
		if err != unix.EINTR {
			s.m, s.err = max(m, 0), err
			return err != unix.EAGAIN
		}
	}
}

// drain is writeSpliced's callback: it sends the header, then the pipe's
// payload; false (wait for the poller) while the socket is full.
func (s *splicer) drain(fd uintptr) bool {
	for len(s.hdr) > 0 || s.left > 0 {
		header := len(s.hdr) > 0
		var k int
		var err syscall.Errno
		if header {
			k, err = send(int(fd), s.hdr, unix.MSG_MORE|unix.MSG_NOSIGNAL)
		} else {
			k, err = splice(s.r, int(fd), s.left, unix.SPLICE_F_NONBLOCK|unix.SPLICE_F_MOVE)
		}
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return false
		case err != 0:
			s.err = err
			return true
		case header:
			s.hdr = s.hdr[k:]
		default:
			s.left -= k
		}
	}
	return true
}

// writeSpliced sends one message of m bytes, the pipe's whole content: the
// header from here, the payload from the pipe. Under mu, as every write.
func (c *Conn) writeSpliced(ch byte, dst syscall.RawConn, s *splicer, drain func(uintptr) bool, m int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.beginWrite(); err != nil {
		return err
	}
	c.hdr = appendHeader(c.hdr[:0], OpBinary, 1+m)
	c.hdr = append(c.hdr, ch)
	s.hdr, s.left, s.err = c.hdr, m, 0
	if err := dst.Write(drain); err != nil {
		return err
	}
	if s.err != 0 {
		return s.err
	}
	return nil
}

// splice is splice(2) through the portable call. (A raw system call,
// skipping the Go runtime's bookkeeping, is kept out until a bench row in
// docs/performance.md shows the portable call costing a user-visible
// figure 10% or more.)
func splice(in, out, n, flags int) (int, syscall.Errno) {
	m, err := unix.Splice(in, nil, out, nil, n, flags)
	return int(m), errnoOf(err)
}

// send is send(2) of b with flags.
func send(fd int, b []byte, flags int) (int, syscall.Errno) {
	n, err := unix.SendmsgN(fd, b, nil, nil, flags)
	return n, errnoOf(err)
}

// errnoOf is a system call's error as the Errno the splicer handles (its
// callers compare it with EAGAIN and EINTR).
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EINVAL
}
