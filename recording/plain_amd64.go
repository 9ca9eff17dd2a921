package recording

// plainUntil is the index of the first byte from i on that needs a second
// look in a JSON string (a control character, '"', '\' or above ASCII), or
// len(s): 16 bytes at a time while there are 16.
func plainUntil(s []byte, i int) int {
	if len(s)-i >= 16 {
		i += plainPrefix(s[i:])
		if len(s)-i >= 16 {
			return i
		}
	}
	return plainUntilWords(s, i)
}

// plainPrefix is the length of s's longest prefix of bytes that need no
// escaping, looked for in whole 16-byte blocks: where it stops short of
// len(s) rounded down to 16, the next byte needs escaping.
//
// Written by hand in assembly (plain_amd64.s): it runs over every byte of
// a recorded session's output, SSE2's 16-byte compares scan plain text
// more than twice as fast as Go's word-at-a-time loop (plainUntilWords;
// BenchmarkPlainUntil), and no library exports this scan alone
// (encoding/json's is a byte at a time).
//
//go:noescape
func plainPrefix(s []byte) int
