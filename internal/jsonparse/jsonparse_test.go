package jsonparse_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/maiden-run/maiden/internal/jsonparse"
)

// reference is what Parse must match: encoding/json's Decoder with
// UseNumber, and nothing but whitespace after the value (as the schema
// package's UnmarshalJSON, which maiden used before).
func reference(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after top-level value")
	}
	return v, nil
}

// check fails t unless Parse and the reference agree on s: both refuse it,
// or both accept it with deeply equal values.
func check(t *testing.T, s string) {
	t.Helper()
	got, err := jsonparse.Parse(s)
	want, werr := reference(s)
	if (err == nil) != (werr == nil) {
		t.Fatalf("Parse(%q): error %v, encoding/json's %v", s, err, werr)
	}
	if err != nil {
		var se *jsonparse.SyntaxError
		if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(s) {
			t.Fatalf("Parse(%q): error %v has no offset within the input", s, err)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse(%q) = %#v, encoding/json's %#v", s, got, want)
	}
}

var edgeCases = []string{
	// empty and whitespace
	``, ` `, "\t\n\r ", `null`, " null ", "\t\n\rnull\r\n\t", "\fnull", "\vnull", "null\f",
	"\u00a0null", "null\u00a0", "\ufeffnull", "\ufeff{}", "\x00", "null\x00", "\x00null",
	// literals
	`true`, `false`, `nul`, `tru`, `fals`, `truex`, `True`, `NULL`, `nullnull`, `true false`,
	// numbers
	`0`, `-0`, `-0.0`, `1e5`, `1E+5`, `1e-5`, `0.5e-3`, `-1.25E+10`, `123456789012345678901234567890`,
	`1e999999`, `-`, `+1`, `01`, `-01`, `00`, `1.`, `.5`, `1.e5`, `1e`, `1e+`, `1E-`, `0x10`,
	`NaN`, `Infinity`, `-Infinity`, `1 2`, `1,`, `[1,]`, `[-]`, `[01]`, `[1.5e3,-0.0,2E-0]`, `-a`, `1ea`,
	// strings
	`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\'"`, `"\a"`, `"\x41"`, `"\u0041"`,
	`"\u00e9"`, `"\u20AC"`, `"\uD83D\uDE00"`, `"\ud83d\ude00"`, `"\uD83D"`, `"\uDE00"`, `"\uDE00\uD83D"`,
	`"\uD83Dx"`, `"\uD83D\u0041"`, `"\uD83D\uD83D\uDE00"`, `"\uD83D\n"`, `"\uD83D\u"`, `"\uD83D\uDE0"`,
	`"\uD83D\uDE0G"`, `"\u12"`, `"\u12G4"`, `"\u"`, `"\U0041"`, `"\u0000"`, `"a\u0000b"`, `"\uFFFD"`,
	`"\uFFFF"`, `"\uFEFF"`, "\"\x00\"", "\"\x1f\"", "\"\x7f\"", "\"\t\"", "\"\n\"", `"abc`, `"abc\`, `"\`, `"`,
	`"` + strings.Repeat("x", 7) + `"`, `"` + strings.Repeat("x", 8) + `"`, `"` + strings.Repeat("x", 9) + `"`,
	`"` + strings.Repeat("x", 8) + `\n` + strings.Repeat("y", 17) + `"`,
	`"` + strings.Repeat("é", 20) + `"`, `"` + strings.Repeat("€", 20) + "\x80\"",
	"\"\xff\"", "\"\xc3\"", "\"\xc3\x28\"", "\"\xe2\x82\"", "\"\xe2\x82\xac\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
	"\"\xf0\x9f\x98\x80\"", "\"\xf0\x9f\x98\"", "\"\xc0\xaf\"", "\"abc\xffdef\\n\xfe\"", "\"\xef\xbf\xbd\"",
	"\"12345678\xff12345678\"", "\"1234567\xe2\x82\xac1234567\"", "\"\\u00e9\xff\"",
	// arrays
	`[]`, `[ ]`, `[`, `]`, `[1`, `[1,`, `[,]`, `[,1]`, `[1 2]`, `[[]]`, `[[],[]]`, `[[[1],[2,[3]]]]`,
	`[null,true,false,"x",1,{}]`, `[1]x`, `[1]]`, `[] []`, " [ 1 , 2 ] ",
	// what follows an element: only a comma or the container's own close
	`[1:2]`, `[1:`, `[1}`, `[1;2]`, `[[1}]`, `[1 }`, `{"a":1]`, `{"a":1:2}`, `{"a":1;"b":2}`, `{"a":[1}`, `{"a":1 ]`,
	// objects
	`{}`, `{ }`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1`, `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{a:1}`, `{'a':1}`,
	`{1:1}`, `{"a":1 "b":2}`, `{"a":1}}`, `{"a":1,"a":2}`, `{"a":1,"b":2,"a":3}`, `{"a":{"a":{"a":{}}}}`,
	`{"\u0061":1,"a":2}`, `{"a\u0000":1}`, "{\"\xff\":1,\"\\ufffd\":2}", `{"":1}`, `{"":""}`,
	" { \"a\" : [ 1 , { \"b\" : null } ] } ", "{\"a\":1}\n", "{\"a\":1}\n\n ", "{\"a\":1}/", `{"a":1}{}`,
	// comments and other non-JSON
	`// x`, `/* */ 1`, `1 // x`, `[1,2]/*x*/`, `'a'`, `undefined`,
}

func TestEdgeCases(t *testing.T) {
	for _, s := range edgeCases {
		check(t, s)
	}
}

// TestDepth: nesting up to MaxDepth is accepted, one more level refused, as
// encoding/json does, with arrays, objects and a mix.
func TestDepth(t *testing.T) {
	for _, d := range []int{1, 100, jsonparse.MaxDepth - 1, jsonparse.MaxDepth, jsonparse.MaxDepth + 1, 3 * jsonparse.MaxDepth} {
		arrays := strings.Repeat("[", d) + strings.Repeat("]", d)
		objects := strings.Repeat(`{"a":`, d-1) + "{}" + strings.Repeat("}", d-1)
		mixed := strings.Repeat(`[{"a":`, d/2) + "0" + strings.Repeat("}]", d/2)
		unclosed := strings.Repeat("[", d)
		for _, s := range []string{arrays, objects, mixed, unclosed} {
			check(t, s)
		}
		_, err := jsonparse.Parse(arrays)
		if d <= jsonparse.MaxDepth && err != nil || d > jsonparse.MaxDepth && (err == nil || !strings.Contains(err.Error(), "exceeded max depth")) {
			t.Fatalf("depth %d: %v", d, err)
		}
	}
}

// TestValues pins the Go types (the reference test compares with
// encoding/json; this says what that is).
func TestValues(t *testing.T) {
	v, err := jsonparse.Parse(` {"n":-0.5e-3,"s":"a\"b","b":[true,false,null],"o":{},"a":[]} `)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"n": json.Number("-0.5e-3"), "s": `a"b`, "b": []any{true, false, nil},
		"o": map[string]any{}, "a": []any{},
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("got %#v", v)
	}
	if a := v.(map[string]any)["a"].([]any); a == nil {
		t.Fatal("an empty array is nil, encoding/json's is not")
	}
}

// TestOffsets: the error says where, in bytes from the input's start.
func TestOffsets(t *testing.T) {
	for _, c := range []struct {
		in  string
		off int
	}{
		{``, 0}, {`{"a":1,}`, 7}, {`[1,2 3]`, 5}, {"\"ab\x01\"", 3}, {`"a\qb"`, 3}, {`{"a":tru}`, 8},
		{`"\u12x4"`, 5}, {`1 2`, 2}, {`[1,2`, 4}, {`-x`, 1}, {`1.x`, 2}, {`{"a" 1}`, 5},
	} {
		_, err := jsonparse.Parse(c.in)
		var se *jsonparse.SyntaxError
		if !errors.As(err, &se) || se.Offset != c.off {
			t.Errorf("Parse(%q): %v, want offset %d", c.in, err, c.off)
		}
	}
}

// TestPooledScratch: a parse that fails or nests does not leave values
// behind for the next one (the scratch stacks are shared through a pool).
func TestPooledScratch(t *testing.T) {
	for i := 0; i < 100; i++ {
		jsonparse.Parse(`[1,[2,{"a":[3,4,"x"` + strings.Repeat(",5", i))
		check(t, `[[1,2],{"b":[3]},[],{}]`)
		check(t, fmt.Sprintf(`{"k":[%d,"\n"]}`, i))
	}
}

func FuzzParseMatchesEncodingJSON(f *testing.F) {
	for _, s := range edgeCases {
		f.Add(s)
	}
	for _, s := range []string{
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		`{"id":123,"ok":true,"tag":"abc","data":[{"x":1.5},{"y":-2e-3}],"s":"\ud800\udc00\u00e9\t"}`,
		"{\"k\":\"v\",\"k\":\"w\",\"\xe9\":\"\xed\xbf\xbf\"}",
		"\t[\r\n1\n,\t2 ]\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check(t, s)
	})
}

// TestLongStringIsNotCopied: a string with no escape is a substring of the
// input; parsing it allocates only the interface value holding it.
func TestLongStringIsNotCopied(t *testing.T) {
	for _, s := range []string{
		`"` + strings.Repeat("plain ascii ", 1000) + `"`,
		`"` + strings.Repeat("grüße € 😀 ", 1000) + `"`,
	} {
		if n := testing.AllocsPerRun(100, func() { jsonparse.Parse(s) }); n > 1 {
			t.Errorf("%d allocations parsing a %d-byte string", int(n), len(s))
		}
	}
}

// checkStrict fails t unless ParseStrict agrees with Parse on s, refusing
// only what readers differ on: what it accepts, Parse accepts as the same
// value; what only Parse accepts is a duplicate key, invalid UTF-8 or a
// lone surrogate escape, found where the error says.
func checkStrict(t *testing.T, s string) {
	t.Helper()
	got, err := jsonparse.ParseStrict(s)
	lax, lerr := jsonparse.Parse(s)
	switch {
	case err == nil && lerr != nil:
		t.Fatalf("ParseStrict(%q) accepts what Parse refuses: %v", s, lerr)
	case err == nil:
		if !reflect.DeepEqual(got, lax) {
			t.Fatalf("ParseStrict(%q) = %#v, Parse's %#v", s, got, lax)
		}
		return
	case lerr != nil:
		return
	}
	var se *jsonparse.SyntaxError
	if !errors.As(err, &se) || se.Offset < 0 || se.Offset >= len(s) {
		t.Fatalf("ParseStrict(%q): error %v has no offset within the input", s, err)
	}
	at := s[se.Offset:]
	switch msg := err.Error(); {
	case strings.HasPrefix(msg, "duplicate key "):
		if at[0] != '"' {
			t.Fatalf("ParseStrict(%q): %v does not point at a key", s, err)
		}
	case strings.HasPrefix(msg, "invalid UTF-8 in string"):
		if r, n := utf8.DecodeRuneInString(at); r != utf8.RuneError || n != 1 {
			t.Fatalf("ParseStrict(%q): %v does not point at invalid UTF-8", s, err)
		}
	case strings.HasPrefix(msg, "lone UTF-16 surrogate "):
		r, perr := strconv.ParseUint(at[2:min(6, len(at))], 16, 32)
		if !strings.HasPrefix(at, `\u`) || perr != nil || !utf16.IsSurrogate(rune(r)) {
			t.Fatalf("ParseStrict(%q): %v does not point at a surrogate escape", s, err)
		}
	default:
		t.Fatalf("ParseStrict(%q) refuses what Parse accepts: %v", s, err)
	}
}

// TestStrict: each thing readers differ on is refused, naming it and
// where; the rest is read as Parse reads it.
func TestStrict(t *testing.T) {
	for _, s := range edgeCases {
		checkStrict(t, s)
	}
	for _, c := range []struct {
		in, msg string
		off     int
	}{
		{`{"a":1,"a":2}`, `duplicate key "a"`, 7},
		{`{"a":1,"b":{"c":[],"c":{}}}`, `duplicate key "c"`, 19},
		{`{"\u0061":1,"a":2}`, `duplicate key "a"`, 12},
		{`[{"k":1},{"k":2,"k":3}]`, `duplicate key "k"`, 16},
		{"{\"a\":\"ok\xff\"}", "invalid UTF-8 in string", 8},
		{"[\"\\n\xc3\"]", "invalid UTF-8 in string", 4},
		{`{"a":"\ud800"}`, `lone UTF-16 surrogate \ud800 in string`, 6},
		{`["x\udc00\ud800"]`, `lone UTF-16 surrogate \udc00 in string`, 3},
		{`"\uD83D\u0041"`, `lone UTF-16 surrogate \uD83D in string`, 1},
	} {
		_, err := jsonparse.ParseStrict(c.in)
		var se *jsonparse.SyntaxError
		if !errors.As(err, &se) || se.Offset != c.off || !strings.HasPrefix(err.Error(), c.msg) {
			t.Errorf("ParseStrict(%q): %v, want %q at offset %d", c.in, err, c.msg, c.off)
		}
	}
	for _, ok := range []string{`{"a":1,"A":2}`, `{"a":{"a":{"a":1}}}`, `[{"k":1},{"k":2}]`, `"\ud83d\ude00"`, `"\uFFFD"`, "\"\xef\xbf\xbd\""} {
		if _, err := jsonparse.ParseStrict(ok); err != nil {
			t.Errorf("ParseStrict(%q): %v", ok, err)
		}
	}
}

func FuzzParseStrict(f *testing.F) {
	for _, s := range edgeCases {
		f.Add(s)
	}
	f.Add("{\"k\":\"v\",\"k\":\"w\",\"\xe9\":\"\xed\xbf\xbf\"}")
	f.Fuzz(func(t *testing.T, s string) {
		checkStrict(t, s)
	})
}

// TestLongRuns: a string longer than the word-at-a-time start (8 words;
// plainLong and ctlOrHigh read the rest) is read as encoding/json reads it, strictly as
// ParseStrict must, and refused where the byte that stops it is, whatever
// that byte is and wherever it falls: in a 32-byte step, in a word after the
// steps, in the bytes after the words, or not at all (no closing quote).
func TestLongRuns(t *testing.T) {
	plants := []string{"\x00", "\x01", "\x1f", "\n", "\x7f", " ", `\n`, `\"`, `\u00e9`, `\ud800`,
		"é", "\xff", "\xc3", "\xe2\x82", "€", `"`}
	// Every offset of short runs; around the edges of plainLong's windows
	// (the first starts 64 bytes into the string and holds 256) in longer.
	type run struct{ n, p int }
	var runs []run
	for n := 32; n <= 112; n++ {
		for p := 0; p < n; p++ {
			runs = append(runs, run{n, p})
		}
	}
	for _, n := range []int{319, 320, 321, 831, 832, 833, 1855, 1856, 1857, 5000} {
		for _, p := range []int{0, 63, 64, 65, 318, 319, 320, 321, 830, 831, 832, 833, 1854, 1855, 1856, 1857, n - 1} {
			if p < n {
				runs = append(runs, run{n, p})
			}
		}
	}
	for _, r := range runs {
		n, p := r.n, r.p
		for _, c := range plants {
			body := strings.Repeat("a", p) + c + strings.Repeat("b", n-p)
			for _, s := range []string{`"` + body + `"`, `"` + body, `{"k":"` + body + `","l":1}`} {
				check(t, s)
				checkStrict(t, s)
			}
			if c[0] < 0x20 {
				s := `"` + body + `"`
				_, err := jsonparse.ParseStrict(s)
				var se *jsonparse.SyntaxError
				if !errors.As(err, &se) || se.Offset != 1+p {
					t.Fatalf("ParseStrict(%q): %v, want a refusal at %d", s, err, 1+p)
				}
			}
		}
	}
}
