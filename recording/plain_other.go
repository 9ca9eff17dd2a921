//go:build !amd64

package recording

// plainUntil is the index of the first byte from i on that needs a second
// look in a JSON string, or len(s). Without vector code: plainUntilWords.
func plainUntil(s []byte, i int) int { return plainUntilWords(s, i) }
