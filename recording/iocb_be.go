//go:build linux && (ppc64 || s390x || mips || mips64)

package recording

// iocb is struct iocb of linux/aio_abi.h on a big-endian machine (key and rw_flags
// in the other order than on a little-endian one: iocb_le.go).
type iocb struct {
	data      uint64 // handed back in the completion: which write it was
	rwFlags   int32
	key       uint32
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
