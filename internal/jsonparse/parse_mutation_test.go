package jsonparse_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/jsonparse"
)

// The tests of this file were added by the mutation pass over the parsers
// and file guards (docs/security-tests.md, "Fifteenth pass: parsers and file
// guards"; docs/mutation/parsers.tsv): each is red with a bug it names
// planted.

// TestEscapeEdges: a \u escape is four hex digits, no other letter (g is
// the first past f); a high surrogate pairs only with a \u escape right
// after it, never with the hex digits after another escape (\n, \\, \/,
// \t, \"), which stay text after a U+FFFD, as encoding/json reads them,
// and which ParseStrict refuses as a lone surrogate.
func TestEscapeEdges(t *testing.T) {
	for _, s := range []string{`"\u00g0"`, `"\u0g00"`, `"\ug000"`, `"\u000g"`, `"\uD83D\u00g0"`,
		`"\uD83D\nDE00"`, `"\uD83D\\DE00"`, `"\uD83D\/DE00"`, `"\uD83D\tDE00"`, `"\uD83D\"DE00"`, `{"\uD83D\nDE00":1}`} {
		check(t, s)
		checkStrict(t, s)
		checkScan(t, s)
	}
	for _, s := range []string{`"\uD83D\nDE00"`, `"\uD83D\\DE00"`} {
		_, err := jsonparse.ParseStrict(s)
		var se *jsonparse.SyntaxError
		if !errors.As(err, &se) || se.Offset != 1 || !strings.HasPrefix(err.Error(), `lone UTF-16 surrogate \uD83D in string`) {
			t.Errorf("ParseStrict(%q): %v; want a lone surrogate \\uD83D at offset 1", s, err)
		}
	}
}

// TestInvalidUTF8Offset: ParseStrict and Scan refuse invalid UTF-8 at the
// first byte that is not part of a valid sequence, past a U+FFFD written
// as it is (EF BF BD, valid UTF-8 that decodes as the replacement
// character).
func TestInvalidUTF8Offset(t *testing.T) {
	for _, c := range []struct {
		in  string
		off int
	}{
		{"\"\xef\xbf\xbd\xff\"", 4},
		{"[\"a\\n\xef\xbf\xbd\xc3\"]", 8},
		{"{\"\xef\xbf\xbd\xef\xbf\xbd\xfe\":1}", 8},
	} {
		_, err := jsonparse.ParseStrict(c.in)
		var se *jsonparse.SyntaxError
		if !errors.As(err, &se) || se.Offset != c.off || !strings.HasPrefix(err.Error(), "invalid UTF-8 in string") {
			t.Errorf("ParseStrict(%q): %v; want invalid UTF-8 at offset %d", c.in, err, c.off)
		}
		_, serr := jsonparse.Scan(c.in, jsonparse.Limits{})
		if serr == nil || err == nil || serr.Error() != err.Error() {
			t.Errorf("Scan(%q): %v; want ParseStrict's %v", c.in, serr, err)
		}
	}
}

// TestLongNumberFromFiveBytes: Limits.LongNumber is asked about every
// number longer than 4 bytes, the first at 5, by both of Scan's passes
// (a caller's limit may refuse any of them), and about none shorter.
func TestLongNumberFromFiveBytes(t *testing.T) {
	var asked []string
	lim := jsonparse.Limits{LongNumber: func(s string) bool { asked = append(asked, s); return true }}
	in := `[1234,12345,-1234,-1.25,1e999,{"a":99999}]`
	want := []string{"12345", "-1234", "-1.25", "1e999", "99999"}
	for name, scan := range map[string]func(string, jsonparse.Limits) (jsonparse.Scanned, error){
		"Scan": jsonparse.Scan,
		"ScanFast": func(s string, l jsonparse.Limits) (jsonparse.Scanned, error) {
			sc, _ := jsonparse.ScanFast(s, l)
			return sc, nil
		},
		"ScanTop": jsonparse.ScanTop,
	} {
		asked = nil
		sc, err := scan(in, lim)
		if err != nil || !sc.Problem || sc.ProblemAt != 6 || strings.Join(asked, " ") != strings.Join(want, " ") {
			t.Errorf("%s(%s): asked about %q, problem %v at %d (%v); want %q asked and a problem at 6", name, in, asked, sc.Problem, sc.ProblemAt, err, want)
		}
	}
}

// TestTopLevelCommaRefused: a comma after a top-level value, then what
// could be an object's member, is refused by Scan's passes as ParseStrict
// refuses it (the first pass has no object there to put a key in).
func TestTopLevelCommaRefused(t *testing.T) {
	for _, s := range []string{`1,"a":1`, `"s","k":1}`, `true,"a"`, `null ,"a":{}`, `[],"a":1`, `{},"a":1`} {
		checkScan(t, s)
	}
}

// TestCaseFoldAtTheAlphabetsEnds: keys differing only in the case of A or
// Z are refused by Scan, at the top level and below it; the bytes around
// the capitals (@, [, `, {) fold to nothing.
func TestCaseFoldAtTheAlphabetsEnds(t *testing.T) {
	for _, s := range []string{`{"Z":1,"z":2}`, `{"a":1,"A":2}`, `{"xyZ":1,"xyz":2}`, `{"o":{"Z":1,"z":2}}`, `{"Z":1}`,
		"{\"@\":1,\"[\":2,\"`\":3,\"{\":4}"} {
		checkScan(t, s)
	}
	_, err := jsonparse.Scan(`{"Z":1,"z":2}`, jsonparse.Limits{})
	var se *jsonparse.SyntaxError
	if !errors.As(err, &se) || se.Offset != 7 || !strings.Contains(err.Error(), `key "z" differs from an earlier key of the object only in case`) {
		t.Errorf(`Scan({"Z":1,"z":2}): %v; want key "z" refused at offset 7 as differing only in case`, err)
	}
}
