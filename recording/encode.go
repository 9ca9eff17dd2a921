// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package recording

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// cutAt is how many of data's bytes, at most max (at least utf8.UTFMax),
// end on a character's boundary: a JSON string cannot hold half of one. A
// run of continuation bytes too long to be a character's is invalid
// anyway, and cut where it is.
func cutAt(data []byte, max int) int {
	if len(data) <= max {
		return len(data)
	}
	for n := max; n > max-utf8.UTFMax; n-- {
		if utf8.RuneStart(data[n]) {
			return n
		}
	}
	return max
}

// appendEventHead appends an event up to its string's opening quote:
// [at, "kind", "
func appendEventHead(b []byte, at float64, kind byte) []byte {
	b = strconv.AppendFloat(append(b, '['), at, 'f', 6, 64)
	return append(b, ',', ' ', '"', kind, '"', ',', ' ', '"')
}

const hexDigits = "0123456789abcdef"

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special8 has the high bit set in a byte of w's eight if that byte, or
// one before it, is a control character, a quote, a backslash or above
// ASCII: the classic "has a zero byte" word tricks (a byte below n, or
// equal to c, borrows in a subtraction). A borrow only starts at such a
// byte and only moves up, so the lowest byte set is the first such byte.
func special8(w uint64) uint64 { return specialBits(w) & highs }

// specialBits is special8 before its mask: OR-ing several words' first
// and masking once tells whether any of them holds such a byte.
func specialBits(w uint64) uint64 {
	return (w - ones*0x20) | (w ^ ones*'"' - ones) | (w ^ ones*'\\' - ones) | w
}

// appendJSONChars appends s as the inside of a JSON string: printable
// ASCII copied in runs, control characters, quote and backslash escaped,
// valid UTF-8 as is, invalid bytes as U+FFFD (as encoding/json does).
// Hand-written because it runs on every output frame of a recorded
// session: encoding/json's reflection and its []any cost a third of the
// session's throughput on a bulk tty transfer; this is one pass.
func appendJSONChars(b []byte, s []byte) []byte {
	start := 0 // s[start:i] is to be appended as it is
	for i := plainUntil(s, 0); i < len(s); i = plainUntil(s, i) {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			if r, size := utf8.DecodeRune(s[i:]); r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case c == '"' || c == '\\':
			b = append(append(b, s[start:i]...), '\\', c)
		case c == '\n':
			b = append(append(b, s[start:i]...), '\\', 'n')
		case c == '\r':
			b = append(append(b, s[start:i]...), '\\', 'r')
		case c == '\t':
			b = append(append(b, s[start:i]...), '\\', 't')
		default:
			b = append(append(b, s[start:i]...), '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	return append(b, s[start:]...)
}

// plainUntil is the index of the first byte from i on that needs a second
// look in a JSON string (special8's: a control character, '"', '\' or
// above ASCII), or len(s). Eight bytes at a time, the first such byte
// found in its word at once, and 64 at a time once a run has begun: a
// terminal's output is mostly printable ASCII in runs between escapes and
// line ends, which a first 64-byte test would only overshoot. The 64-byte
// test masks once for its eight words (BenchmarkPlainUntil).
func plainUntil(s []byte, i int) int {
	for i+8 <= len(s) {
		if m := special8(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		for i += 8; i+64 <= len(s); i += 64 {
			w := s[i : i+64 : i+64]
			if (specialBits(binary.LittleEndian.Uint64(w[0:8]))|specialBits(binary.LittleEndian.Uint64(w[8:16]))|
				specialBits(binary.LittleEndian.Uint64(w[16:24]))|specialBits(binary.LittleEndian.Uint64(w[24:32]))|
				specialBits(binary.LittleEndian.Uint64(w[32:40]))|specialBits(binary.LittleEndian.Uint64(w[40:48]))|
				specialBits(binary.LittleEndian.Uint64(w[48:56]))|specialBits(binary.LittleEndian.Uint64(w[56:64])))&highs != 0 {
				break
			}
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return i
		}
	}
	return i
}

// incompleteTail is how many bytes at the end of b start a UTF-8 sequence
// that is not complete yet (0-3).
func incompleteTail(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 { // a leading byte: is its sequence complete?
			if !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}
