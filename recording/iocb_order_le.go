//go:build linux && !(ppc64 || s390x || mips || mips64)

package recording

// rwFlagsAt: on a little-endian machine aio_rw_flags follows aio_key.
const rwFlagsAt = 1
