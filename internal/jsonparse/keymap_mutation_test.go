package jsonparse

import (
	"fmt"
	"strings"
	"testing"
)

// The tests of this file were added by the mutation pass over the parsers
// and file guards (docs/security-tests.md, "Fifteenth pass: parsers and file
// guards"; docs/mutation/parsers.tsv): each is red with a bug it names
// planted.

// TestManyKeysGoToAMap: once an object has more than dupMapAfter keys,
// Scan's first pass keeps them in a map, nested or at the top level, short
// or long, so that finding a duplicate costs one look-up and not a
// comparison with every key before it (an object of 100,000 short keys,
// compared pairwise, is 5 billion comparisons from a megabyte of input).
func TestManyKeysGoToAMap(t *testing.T) {
	keys := func(format string) string {
		var b strings.Builder
		for i := range dupMapAfter + 1 {
			fmt.Fprintf(&b, format, i)
		}
		// Room after the last key, for the first pass's read of a key
		// as one word, 8 bytes from its start.
		return b.String() + "          "
	}
	for name, doc := range map[string]string{
		"short keys, nested":      `{"o":{` + keys(`"k%02d":1,`),
		"long keys, nested":       `[{` + keys(`"long-key-%02d":1,`),
		"short keys, top level":   `{` + keys(`"k%02d":1,`),
		"long keys, top level":    `{` + keys(`"long-key-%02d":1,`),
		"short keys, in an array": `[1,{` + keys(`"%02d":[],`),
	} {
		// Unclosed, so that the first pass stops with the object open.
		p := newScanParser(doc, Limits{})
		if p.scanFast() {
			t.Fatalf("%s: an unclosed document accepted", name)
		}
		if len(p.seen) != 1 || len(p.seen[0]) != dupMapAfter+1 {
			t.Errorf("%s: after %d keys, %d maps of keys; want the object's %d keys in one map", name, dupMapAfter+1, len(p.seen), dupMapAfter+1)
		}
	}
}
