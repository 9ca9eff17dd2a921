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
	out, err := c.ws.NetConn().(*net.TCPConn).SyscallConn()
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
	size = min(size, maxSplice)
	for {
		m, err := spliceIn(in, blocking, p[1], size)
		if n == 0 && (err == unix.EINVAL || err == unix.ENOSYS) {
			return 0, false, nil // this source cannot be spliced; nothing was taken from it
		}
		if err != nil || m == 0 { // 0: the writers closed (EOF)
			return n, true, err
		}
		if err := c.writeSpliced(ch, out, p[0], m); err != nil {
			return n, true, err
		}
		n += int64(m)
	}
}

// pipeMode tells whether fd is a pipe or FIFO, and whether it is in
// blocking mode (os.NewFile of a blocking descriptor: Go's poller does not
// watch it, so a splice there must block rather than wait on the poller).
func pipeMode(rc syscall.RawConn) (blocking, isPipe bool) {
	_ = rc.Control(func(fd uintptr) {
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

// spliceIn moves up to size bytes from src into the (empty) pipe w,
// waiting on Go's poller until some are there or the writers are gone.
func spliceIn(src syscall.RawConn, blocking bool, w, size int) (int, error) {
	flags := unix.SPLICE_F_NONBLOCK
	if blocking {
		flags = 0
	}
	var m int64
	var serr error
	err := src.Read(func(fd uintptr) bool {
		for {
			m, serr = unix.Splice(int(fd), nil, w, nil, size, flags)
			if serr != unix.EINTR {
				return serr != unix.EAGAIN
			}
		}
	})
	if err == nil {
		err = serr
	}
	return int(m), err
}

// writeSpliced sends one message of m bytes, the pipe r's whole content:
// the header from here, the payload from the pipe. Under mu, as every write.
func (c *Conn) writeSpliced(ch byte, dst syscall.RawConn, r, m int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.beginWrite(); err != nil {
		return err
	}
	c.hdr = appendHeader(c.hdr[:0], OpBinary, 1+m)
	c.hdr = append(c.hdr, ch)
	hdr := c.hdr
	left := m
	var werr error
	err := dst.Write(func(fd uintptr) bool {
		for len(hdr) > 0 && werr == nil {
			k, err := unix.SendmsgN(int(fd), hdr, nil, nil, unix.MSG_MORE|unix.MSG_NOSIGNAL)
			switch err {
			case nil:
				hdr = hdr[k:]
			case unix.EINTR:
			case unix.EAGAIN:
				return false
			default:
				werr = err
			}
		}
		for left > 0 && werr == nil {
			k, err := unix.Splice(r, nil, int(fd), nil, left, unix.SPLICE_F_NONBLOCK|unix.SPLICE_F_MOVE)
			switch err {
			case nil:
				left -= int(k)
			case unix.EINTR:
			case unix.EAGAIN:
				return false
			default:
				werr = err
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	return err
}
