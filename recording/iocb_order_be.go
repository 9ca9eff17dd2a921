//go:build linux && (ppc64 || s390x || mips || mips64)

package recording

// rwFlagsAt: on a big-endian machine aio_rw_flags comes before aio_key.
const rwFlagsAt = 0
