package jsonparse

import (
	"strings"
	"testing"
)

// TestStringScanIsLinear: the bytes plainLong reads, over a whole parse,
// are at most a small multiple of the input's length, whatever the strings
// look like. Its bound: plain calls it only after 64 plain bytes, and a call
// reads at most 256 bytes more than twice its run, so a parse reads at most
// (2 + 256/64) times the input; 8× leaves room. A window that runs to the end of the document (or a search not
// bounded by the window) reads the rest of the input once per escape, and a
// 256 KiB string with an escape every 100 bytes then reads ~340 MB. Counted
// bytes, not time: the bound holds on any machine.
func TestStringScanIsLinear(t *testing.T) {
	const n = 256 << 10
	every := func(k int, esc string) string {
		var b strings.Builder
		b.WriteByte('"')
		for b.Len() < n {
			b.WriteString(strings.Repeat("a", k))
			b.WriteString(esc)
		}
		b.WriteByte('"')
		return b.String()
	}
	many := func(count, size int, word string) string {
		var b strings.Builder
		b.WriteByte('[')
		for i := range count {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + strings.Repeat(word, size/len(word)) + `"`)
		}
		b.WriteByte(']')
		return b.String()
	}
	cases := map[string]string{
		"one long string":              `"` + strings.Repeat("a", n) + `"`,
		"escape every 65 bytes":        every(65, `\n`),
		"escape every 66 bytes":        every(66, `\n`),
		"escape every 80 bytes":        every(80, `\/`),
		"escape every 100 bytes":       every(100, `\"`),
		"escape every 257 bytes":       every(257, `\u00e9`),
		"escape every 1000 bytes":      every(1000, `\\`),
		"non-ASCII, escape every 300":  every(300, "é\\t"),
		"many strings of 300 bytes":    many(800, 300, "b"),
		"many strings of 5000 bytes":   many(50, 5000, "c"),
		"many non-ASCII strings":       many(400, 600, "€"),
		"string without closing quote": `"` + strings.Repeat("a", n),
	}
	for name, s := range cases {
		read := 0
		testHookWindow = func(k int) { read += k }
		_, _ = Parse(s)
		testHookWindow = nil
		if read == 0 {
			t.Fatalf("%s: plainLong read nothing; the test no longer sees the scan", name)
		}
		if read > 8*len(s) {
			t.Errorf("%s: plainLong read %d bytes of a %d-byte input (%.1f×); want at most 8×", name, read, len(s), float64(read)/float64(len(s)))
		}
		t.Logf("%s: %d bytes read of %d (%.2f×)", name, read, len(s), float64(read)/float64(len(s)))
	}
}
