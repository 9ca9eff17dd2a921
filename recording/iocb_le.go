//go:build linux && !(ppc64 || s390x || mips || mips64)

package recording

// iocb is struct iocb of linux/aio_abi.h on a little-endian machine (the
// 32-bit key and rw_flags trade places on a big-endian one: iocb_be.go).
type iocb struct {
	data      uint64 // handed back in the completion: which write it was
	key       uint32
	rwFlags   int32
	opcode    uint16
	prio      int16
	fd        uint32
	buf       uint64 // with iocbCmdPwritev: the iovec array
	nbytes    uint64 // and its length
	offset    int64
	reserved2 uint64
	flags     uint32
	resfd     uint32
}
