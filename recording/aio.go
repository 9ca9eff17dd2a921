//go:build linux

package recording

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Linux's native asynchronous I/O (io_setup(2), io_submit(2),
// io_getevents(2)), the part a recording needs: vectored writes, and their
// completions collected later. Hand-written: golang.org/x/sys/unix has the
// system calls' numbers but not the control block they take, and no
// well-kept Go library wraps them. Not io_uring: its completions run as
// work on the submitting thread, which for a goroutine is any thread, and
// its writes that cannot go at once are handed to a kernel thread, a wake
// per write again.

// ioEvent is struct io_event.
type ioEvent struct {
	data uint64
	obj  uint64
	res  int64 // bytes written, or -errno
	res2 int64
}

// iocb is struct iocb of linux/aio_abi.h.
type iocb struct {
	data uint64 // handed back in the completion: which write it was
	// aio_key and aio_rw_flags, whose order follows the byte order
	// (rwFlagsAt: iocb_order_*.go)
	keyAndRWFlags [2]uint32
	opcode        uint16
	prio          int16
	fd            uint32
	buf           uint64 // with iocbCmdPwritev: the iovec array
	nbytes        uint64 // and its length
	offset        int64
	reserved2     uint64
	flags         uint32
	resfd         uint32
}

const iocbCmdPwritev = 8

// aioRing is one recording's AIO context: at most depth writes in flight.
type aioRing struct {
	ctx   uintptr
	depth int
	evs   []ioEvent
	iov   []unix.Iovec // the iovec array of the write being submitted
}

func newAIORing(depth int) (*aioRing, error) {
	a := &aioRing{depth: depth, evs: make([]ioEvent, depth)}
	if _, _, e := unix.RawSyscall(unix.SYS_IO_SETUP, uintptr(depth), uintptr(unsafe.Pointer(&a.ctx)), 0); e != 0 {
		return nil, e
	}
	return a, nil
}

// pwritev submits a write of iov at off, identified by id. The kernel
// reads the control block and the iovec array during the call; the
// memory they point to is the kernel's until the write completes.
//
// With nowait, the write is submitted with RWF_NOWAIT through RawSyscall:
// a direct write into allocated blocks is queued to the disk, not waited
// for (file.ahead sees to that), so the goroutine keeps its P and wakes no
// thread. Where the write would wait (the disk's request queue full, the
// inode locked, pages of the range in the page cache), the kernel refuses
// it instead, in its completion (-EAGAIN), and file.collect submits it
// again without nowait: through Syscall, which the Go runtime sees, so a
// submission that sleeps in the kernel hands its P on and holds up neither
// the goroutines beside it nor a garbage collection's stop.
func (a *aioRing) pwritev(fd int, iov []unix.Iovec, off int64, id uint64, nowait bool) error {
	cb := iocb{data: id, opcode: iocbCmdPwritev, fd: uint32(fd),
		buf: uint64(uintptr(unsafe.Pointer(&iov[0]))), nbytes: uint64(len(iov)), offset: off}
	if nowait {
		cb.keyAndRWFlags[rwFlagsAt] = unix.RWF_NOWAIT
	}
	p := &cb
	for {
		var n uintptr
		var e unix.Errno
		if nowait {
			n, _, e = unix.RawSyscall(unix.SYS_IO_SUBMIT, a.ctx, 1, uintptr(unsafe.Pointer(&p)))
		} else {
			n, _, e = unix.Syscall(unix.SYS_IO_SUBMIT, a.ctx, 1, uintptr(unsafe.Pointer(&p)))
		}
		runtime.KeepAlive(iov) // cb points at it as an integer
		switch {
		case e == unix.EINTR:
			continue
		case e != 0:
			return e
		case n != 1:
			return unix.EAGAIN
		}
		return nil
	}
}

// completed returns the writes completed so far; with wait, at least atLeast
// of them (blocking: Close's drain).
func (a *aioRing) completed(atLeast int, wait bool) ([]ioEvent, error) {
	for {
		var n uintptr
		var e unix.Errno
		if wait {
			n, _, e = unix.Syscall6(unix.SYS_IO_GETEVENTS, a.ctx, uintptr(min(atLeast, len(a.evs))), uintptr(len(a.evs)), uintptr(unsafe.Pointer(&a.evs[0])), 0, 0)
		} else {
			var zero unix.Timespec
			n, _, e = unix.RawSyscall6(unix.SYS_IO_GETEVENTS, a.ctx, 0, uintptr(len(a.evs)), uintptr(unsafe.Pointer(&a.evs[0])), uintptr(unsafe.Pointer(&zero)), 0)
		}
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return nil, e
		}
		return a.evs[:n], nil
	}
}

func (a *aioRing) destroy() {
	unix.RawSyscall(unix.SYS_IO_DESTROY, a.ctx, 0, 0)
}
