package jsonparse_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/maiden-run/maiden/internal/jsonparse"
)

// testLimits are the limits the scan tests check: a shallow depth (so the
// fuzzer reaches it) and numbers of more than 6 bytes.
var testLimits = jsonparse.Limits{Depth: 4, LongNumber: func(s string) bool { return len(s) > 6 }}

// refMeasure is what Scan must find of a value ParseStrict returned: the
// walk jsonschema's checkInput makes (values and keys counted, strings'
// and keys' bytes, containers deeper than lim.Depth and numbers
// lim.LongNumber flags are problems).
func refMeasure(v any, depth int, lim jsonparse.Limits, nodes, bytes *int) (problem bool) {
	*nodes++
	switch v := v.(type) {
	case map[string]any:
		problem = depth > lim.Depth
		for k, e := range v {
			*nodes++
			*bytes += len(k)
			problem = refMeasure(e, depth+1, lim, nodes, bytes) || problem
		}
	case []any:
		problem = depth > lim.Depth
		for _, e := range v {
			problem = refMeasure(e, depth+1, lim, nodes, bytes) || problem
		}
	case string:
		*bytes += len(v)
	case json.Number:
		problem = len(v) > 4 && lim.LongNumber(string(v))
	}
	return problem
}

// checkScan fails t unless Scan agrees with ParseStrict on s: the same
// refusal (message and offset), or for what both accept, the measures and
// the limits' verdict of the value ParseStrict returns, and the top-level
// object's members decoding to its members.
func checkScan(t *testing.T, s string) {
	t.Helper()
	got, err := jsonparse.Scan(s, testLimits)
	want, werr := jsonparse.ParseStrict(s)
	// Scan refuses what ParseStrict refuses, with its error, and besides
	// that an object two of whose keys differ only in case.
	folded := werr == nil && foldedKeys(want)
	switch {
	case folded:
		if err == nil || !strings.Contains(err.Error(), "only in case") {
			t.Fatalf("Scan(%q): error %v, want keys differing only in case refused", s, err)
		}
	case (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error():
		t.Fatalf("Scan(%q): error %v, ParseStrict's %v", s, err, werr)
	}
	// Scan's first pass alone accepts exactly what ParseStrict accepts (it
	// leaves no valid document to the second), and finds what the second
	// alone finds, to the problem's offset.
	fast, ok := jsonparse.ScanFast(s, testLimits)
	slow, serr := jsonparse.ScanTop(s, testLimits)
	if ok != (werr == nil) || (serr == nil) != (werr == nil) || serr != nil && serr.Error() != werr.Error() {
		t.Fatalf("Scan(%q): the fast pass says %v, the recursive one %v, ParseStrict %v", s, ok, serr, werr)
	}
	if werr != nil {
		return
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("Scan(%q): the fast pass alone %+v, the recursive one %+v", s, fast, slow)
	}
	if fast.FoldableKeys != foldableKeys(want) {
		t.Fatalf("Scan(%q): FoldableKeys %v, the value's keys say %v", s, fast.FoldableKeys, !fast.FoldableKeys)
	}
	if err != nil {
		return
	}
	if !reflect.DeepEqual(got, slow) {
		t.Fatalf("Scan(%q) = %+v; the fast pass alone %+v, the recursive one %+v", s, got, fast, slow)
	}
	var nodes, bytes int
	problem := refMeasure(want, 1, testLimits, &nodes, &bytes)
	if got.Nodes != nodes || got.Bytes != bytes || got.Problem != problem {
		t.Fatalf("Scan(%q): %d nodes, %d bytes, problem %v; the value has %d, %d, %v", s, got.Nodes, got.Bytes, got.Problem, nodes, bytes, problem)
	}
	if got.Problem {
		// It points at a value past the limits: a container or a long number.
		at := s[got.ProblemAt:]
		if at[0] != '[' && at[0] != '{' {
			n := strings.IndexAny(at, ",]} \t\r\n")
			if n < 0 {
				n = len(at)
			}
			if !testLimits.LongNumber(at[:n]) {
				t.Fatalf("Scan(%q): problem at %d, %q is within the limits", s, got.ProblemAt, at)
			}
		}
	}
	m, isObject := want.(map[string]any)
	if got.Object != isObject {
		t.Fatalf("Scan(%q): object %v", s, got.Object)
	}
	if !isObject {
		if got.Members != nil {
			t.Fatalf("Scan(%q): members of a non-object", s)
		}
		return
	}
	if len(got.Members) != len(m) {
		t.Fatalf("Scan(%q): %d members, the object has %d", s, len(got.Members), len(m))
	}
	for _, mem := range got.Members {
		v, err := jsonparse.ParseStrict(mem.Value)
		w, ok := m[mem.Key]
		if err != nil || !ok || !reflect.DeepEqual(v, w) {
			t.Fatalf("Scan(%q): member %q = %q (%v), the object's %#v", s, mem.Key, mem.Value, err, w)
		}
		if str, isStr := w.(string); mem.Plain && (!isStr || `"`+str+`"` != mem.Value) {
			t.Fatalf("Scan(%q): member %q = %q is not a plain string", s, mem.Key, mem.Value)
		}
	}
}

// foldedKeys says whether an object in v has two keys that differ but are
// equal under case folding (strings.EqualFold), compared pair by pair.
func foldedKeys(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k, e := range v {
			for _, o := range keys {
				if strings.EqualFold(k, o) {
					return true
				}
			}
			keys = append(keys, k)
			if foldedKeys(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if foldedKeys(e) {
				return true
			}
		}
	}
	return false
}

// foldableKeys says whether a key in v holds a capital ASCII letter or a
// non-ASCII character.
func foldableKeys(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.ToLower(k) != k || strings.IndexFunc(k, func(r rune) bool { return r >= utf8.RuneSelf }) >= 0 || foldableKeys(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if foldableKeys(e) {
				return true
			}
		}
	}
	return false
}

// scanCases are hostile inputs for the scan beside the parser's edge cases:
// duplicates behind escapes and past the map threshold, depth around both
// limits, long numbers, invalid UTF-8 and lone surrogates in keys.
func scanCases() []string {
	var keys17, keys40 []string
	for i := range 40 {
		k := `"k` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":` + "1"
		if i < 17 {
			keys17 = append(keys17, k)
		}
		keys40 = append(keys40, k)
	}
	obj17 := "{" + strings.Join(keys17, ",") + "}"
	obj40 := "{" + strings.Join(keys40, ",") + "}"
	deep := func(d int) string { return strings.Repeat("[", d) + strings.Repeat("]", d) }
	deepObj := func(d int) string { return strings.Repeat(`{"a":`, d-1) + "{}" + strings.Repeat("}", d-1) }
	return []string{
		// Keys differing only in case (Go's encoding/json takes one for the
		// other), nested, past the map threshold, through escapes, the
		// Kelvin sign and the long s; and look-alikes that are not.
		`{"city":"a","CITY":"b"}`, `{"a":{"Kind":1,"\u212aind":2}}`, `{"a":[{"s":1,"\u017f":2}]}`,
		`{"x":{"ab":1,"Ab":2}}`, `{"City":1,"cities":2,"CITY_ID":3}`, `{"é":1,"É":2}`, `{"é":1,"e":2}`,
		strings.Replace(obj40, `"kaa"`, `"KAA"`, 1), strings.Replace(obj40, `"kab"`, `"KAA"`, 1),
		`{"a":1,"\u0061":2}`, `{"\u0061":1,"a":2}`, `{"a\u0062":1,"ab":2}`, `{"\/":1,"/":2}`,
		`{"\ud83d\ude00":1,"😀":2}`, `{"a":{"b":1,"b":2},"a":3}`, `{"a":[{"b":1,"\u0062":2}]}`,
		`{"a":1,"b":{"a":1},"c":{"a":{"a":1}}}`, `{"a":1,"b":[1,"\u00e9"],"c":true}`,
		obj17, obj40, strings.Replace(obj17, "}", `,"kaa":2}`, 1), strings.Replace(obj40, "}", `,"kza":2}`, 1),
		strings.Replace(obj40, "}", `,"k\u007aa":2}`, 1), strings.Replace(obj40, "}", `,"kzb":2,"kzb":3}`, 1),
		deep(3), deep(4), deep(5), deepObj(3), deepObj(4), deepObj(5),
		deep(jsonparse.MaxDepth - 1), deep(jsonparse.MaxDepth), deep(jsonparse.MaxDepth + 1),
		deepObj(jsonparse.MaxDepth), deepObj(jsonparse.MaxDepth + 1),
		`[123456]`, `[1234567]`, `{"n":-1.5e300}`, `{"n":1e1000000}`, `[1.25,12345678901234567890]`,
		"{\"\xff\":1}", "{\"a\":\"\xc3\"}", `{"\ud800":1}`, `{"a":"\udc00"}`, `{"a":1} x`, `{"a":1}{}`,
		`{"message":"m","data":[{"id":123,"ok":true,"tag":"abc"},{"id":124,"ok":false,"tag":"d\ne"}]}`,
		` { "a" : 1 , "b" : [ 1 , 2 ] } `, `{"a":"x\ny","b":"\u00e9","c":"é","d":"\""}`, `{"a":{"a":1},"a":{"a":2}}`, `{"":1,"":2}`, `{"a":1,"b":2,"a":[1}`,
	}
}

// wordCases are inputs at the edges of the scan's word reads (scanFast
// reads a string or a key in one 8-byte word, and the colon after a key
// with it; plain reads the rest a word at a time): a quote, a backslash, a
// control byte, a valid and an invalid non-ASCII byte at each offset of the
// first two words of a string value and of a key; multi-byte UTF-8 split
// across two words, whole and cut; strings, keys and literals ending where
// the input ends; keys of 0 to 9 bytes with and without whitespace before
// their colon; and duplicate keys as words (up to 7 bytes), as long keys,
// behind escapes, in nested objects and around the move to a map.
func wordCases() []string {
	var out []string
	stopsAt := []string{`"`, `\n`, `\u00e9`, "\x01", "\x1f", "\x7f", "é", "\xff", "\xc3", "€"}
	for n := 0; n < 17; n++ {
		pre := strings.Repeat("a", n)
		for _, b := range stopsAt {
			str := `"` + pre + b + `bc"`
			out = append(out,
				str, `[`+str+`]`, `{"k":`+str+`}`, `{"k":`+str+`,"l":1}`, // as a value
				`{`+str+`:1}`, `{`+str+`:1,"z":2}`, `{"z":1,`+str+` :2}`, // as a key
				`[{`+str+`:1}]`, `{"o":{"z":1,`+str+`:2}}`, `[{"z":1,`+str+` :2,"y":3}]`, // below the top level
				`"`+pre+b, `{"`+pre+b, // cut at the end
			)
		}
		// A string or key of n bytes ending where the input ends, or one
		// byte short of its quote.
		out = append(out, `"`+pre+`"`, `"`+pre, `{"`+pre+`"`, `{"`+pre+`":`, `{"`+pre+`":1}`, `{"`+pre+`" :1}`,
			`{"`+pre+"\":\t1}", `{"`+pre+`":"`+pre+`"}`, `["`+pre+`",1]`,
			`[{"`+pre+`"`, `[{"`+pre+`":`, `[{"`+pre+`":1}]`, `[{"`+pre+`" :1}]`, `[{"`+pre+`"1}]`, `[{"`+pre+`"}]`)
	}
	// Multi-byte sequences across a word's end: at offsets 5 to 9 of a
	// string's bytes, whole, cut, and with a bad continuation byte.
	for _, seq := range []string{"é", "€", "😀", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xe2\x28\xa1", "\xed\xa0\x80"} {
		for n := 5; n < 10; n++ {
			str := `"` + strings.Repeat("x", n) + seq + `yz"`
			out = append(out, str, `{`+str+`:1}`, `{"k":`+str+`}`)
		}
	}
	// Literals and numbers cut at the end, and followed by what ends them.
	for _, v := range []string{"true", "false", "null", "0", "-1", "123", "12345", "1234567", "1.5", "1e5", "-0.5E+3"} {
		for k := 1; k <= len(v); k++ {
			out = append(out, `[`+v[:k], `{"a":`+v[:k], `[`+v[:k]+`]`, `{"a":`+v[:k]+`}`)
		}
		out = append(out, v+` `, `[`+v+`,`+v+`]`, `[`+v+"\n]", `{"a":`+v+` ,"b":`+v+`}`, `[`+v+`x]`, `[`+v+`"]`)
	}
	// Duplicates: as words, long, escaped, nested, past the move to a map.
	long := strings.Repeat("k", 12)
	many := func(extra string) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range 20 {
			if i == 7 {
				b.WriteString(`"` + long + `":0,`)
			}
			b.WriteString(`"k` + strings.Repeat("x", i%9) + string(rune('a'+i)) + `":1,`)
		}
		b.WriteString(extra + `}`)
		return b.String()
	}
	dups := []string{
		`{"abcdefg":1,"abcdefg":2}`, `{"abcdefg":1,"abcdef\u0067":2}`, `{"abcdefgh":1,"abcdefgh":2}`,
		`{"abcdefgh":1,"abcdefg\u0068":2}`, `{"abcdefgh":1,"abcdefg":2,"abcdefghi":3}`, `{"a":1,"a ":2}`,
		`{"` + long + `":{"` + long + `":1},"` + long + `":2}`, `{"` + long + `":{"` + long + `":1},"x":2}`,
		`[{"` + long + `":1},{"` + long + `":2}]`, `{"a":{"b":{"` + long + `":1,"c":2},"` + long + `":3},"` + long + `":4}`,
		`{"x":1,"y":{"x":2,"y":3},"x":4}`, `{"":1,"\u0000":2,"":3}`, "{\"\x00\":1}",
		many(`"z":2`), many(`"kxxc":2`), many(`"` + long + `":2`), many(`"k\u0078xc":2`), many(`"kq":{"kq":1}`),
		`[` + many(`"z":2`) + `,` + many(`"`+long+`":3`) + `]`, `{"o":` + many(`"z":2`) + `,"o":1}`,
		`{"a":1,"b":2,"a":3}`, `{"a":1,"b":2,"c":3,"b":4}`, `{"":1,"":2}`, `{"ab":1,"a\u0062":2}`,
	}
	// Each at the top level (whose keys go the longer way, for its
	// members) and below it (whose short keys are words only).
	for _, d := range dups {
		out = append(out, d, `[`+d+`]`, `{"o":`+d+`}`, `[{"x":[`+d+`,`+d+`]}]`)
	}
	return out
}

func TestScanAgreesWithParseStrict(t *testing.T) {
	for _, s := range append(append(edgeCases, scanCases()...), wordCases()...) {
		checkScan(t, s)
	}
}

// TestScanMembers pins the members' form: keys unescaped, values' text
// without the whitespace around them.
func TestScanMembers(t *testing.T) {
	sc, err := jsonparse.Scan(` { "a\u0062" : [ 1 , 2 ] ,"c":"d" } `, jsonparse.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []jsonparse.Member{{Key: "ab", Value: "[ 1 , 2 ]"}, {Key: "c", Value: `"d"`, Plain: true}}
	if !sc.Object || !reflect.DeepEqual(sc.Members, want) || sc.Problem {
		t.Fatalf("%+v", sc)
	}
}

// TestScanBuildsNothing: the scan of many small objects allocates only
// its members' slice.
// TestScanBuildsNothing: scanning 10,000 objects makes a handful of
// allocations (the members of the top-level object, and a parser when the
// pool has none: the race detector's sync.Pool drops a quarter of what it
// is given, so the count moves from run to run), where decoding them makes
// tens of thousands.
func TestScanBuildsNothing(t *testing.T) {
	s := `{"message":"m","data":[` + strings.TrimSuffix(strings.Repeat(`{"id":123,"ok":true,"tag":"abc"},`, 10000), ",") + `]}`
	if n := testing.AllocsPerRun(20, func() { jsonparse.Scan(s, testLimits) }); n > 10 {
		t.Errorf("%v allocations scanning %d bytes of 10,000 objects, want at most 10", n, len(s))
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range append(append(edgeCases, scanCases()...), wordCases()...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkScan(t, s)
	})
}
