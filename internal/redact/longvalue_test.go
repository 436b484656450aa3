package redact

import (
	"bytes"
	"math/rand/v2"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestPasswordValueOfAnyLength: a password value longer than the 512
// characters values were once cut at is replaced whole, quoted up to its
// closing quote, bare up to the character that ends it; an unterminated
// quote still matches nothing, and the minimums hold.
func TestPasswordValueOfAnyLength(t *testing.T) {
	r := newBuiltin(t)
	a600, a5k := strings.Repeat("a", 600), strings.Repeat("a", 5000)
	longJWT := "eyJ" + strings.Repeat("Qk", 900) // not a jwt: no dots
	for _, c := range []struct{ in, want string }{
		{`{"password": "` + a600 + `"}`, `{"password": "[REDACTED:password]"}`},
		{"password: " + a600, "password: [REDACTED:password]"},
		{"password: " + a600 + "\nnext line", "password: [REDACTED:password]\nnext line"},
		{"DB_PASSWORD=" + a5k + "&user=ann", "DB_PASSWORD=[REDACTED:password]&user=ann"},
		{`api_key='` + a5k + `' rest`, `api_key='[REDACTED:password]' rest`},
		{`{"client_secret": "` + strings.Repeat(`ab\"cd`, 300) + `", "n": 1}`, `{"client_secret": "[REDACTED:password]", "n": 1}`},
		{"secret=" + strings.Repeat("é日😀", 400) + ";", "secret=[REDACTED:password];"},
		{"access_token: " + longJWT + " ok", "access_token: [REDACTED:password] ok"},
		{"private_key=" + strings.Repeat("\xff", 700) + ",", "private_key=[REDACTED:password],"},
		// Unchanged: no closing quote (the quote is not a bare value's
		// character), a backslash-newline ends a quoted value, minimums.
		{`{"password": "` + a600, `{"password": "` + a600},
		{`password="` + a600 + "\\\n" + `"`, `password="` + a600 + "\\\n" + `"`},
		{`password="ab" pwd=abc`, `password="ab" pwd=abc`},
	} {
		if got := r.Redact(c.in); got != c.want {
			t.Errorf("Redact(%.40q…, %d bytes) = %.60q… (%d bytes), want %.60q… (%d bytes)", c.in, len(c.in), got, len(got), c.want, len(c.want))
		}
	}
}

// TestResumeInsideABareValueChangesNothing: find resumes past a long bare
// value but its last keywordSlack bytes (valueNext); a keyword in that tail
// whose key runs past the value (its widest form under (?i): ſ for s, K for
// k) still has its own value replaced, and on generated text find returns
// what it returns trying every keyword occurrence.
func TestResumeInsideABareValueChangesNothing(t *testing.T) {
	r := newBuiltin(t)
	x := strings.Repeat("x", 100)
	for _, c := range []struct{ in, want string }{
		{"password=" + x + "password = hunter22", "password=[REDACTED:password] = [REDACTED:password]"},
		{"password=" + x + "client_ſecret= hunter22", "password=[REDACTED:password] [REDACTED:password]"},
		{"password=" + x + "private_Key\t:\thunter22", "password=[REDACTED:password]\t:\t[REDACTED:password]"},
		{"password=" + x + `access_toKen"="hunter22"`, `password=[REDACTED:password]"="[REDACTED:password]"`},
		{"password=" + x + "pwd=" + x + "pwd=hunter22 end", "password=[REDACTED:password] end"},
	} {
		if got := r.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	g := rand.New(rand.NewPCG(seed, 11))
	for range 500 {
		text := genValueText(g)
		if got, want := r.find(text, 0), findEveryOccurrence(r, text); !slices.Equal(got, want) {
			t.Fatalf("on %q: find %v, trying every occurrence %v", text, got, want)
		}
	}
}

// findEveryOccurrence is find without valueNext's resume: every occurrence
// of every start word is tried.
func findEveryOccurrence(r *Redactor, text string) []span {
	var spans []span
	lower := asciiLower(text)
	for i := range r.dets {
		d := &r.dets[i]
		add := func(s, e, off, from int) {
			if s < 0 || s == e || strings.HasPrefix(text[off+s:off+e], "[REDACTED:") || d.skip != nil && d.skip(text[off+s:off+e]) {
				return
			}
			spans = append(spans, span{off + s, off + e, d.marker, from})
		}
		if d.starts != nil {
			for _, w := range d.starts {
				for at := 0; ; at++ {
					j := strings.Index(lower[at:], w)
					if j < 0 {
						break
					}
					at += j
					if s, e, _, ok := d.matchStart(text[at:]); ok {
						add(s, e, at, at)
					}
				}
			}
			continue
		}
		for _, m := range d.re.FindAllStringSubmatchIndex(text, -1) {
			s, e := d.secret(m)
			add(s, e, 0, m[0])
		}
	}
	if strings.IndexByte(text, '\\') >= 0 {
		spans = append(spans, r.jsonStrings(text, 0)...)
	}
	return merge(spans)
}

// TestKeywordSlackCoversTheKeywords: keywordSlack is at least the widest
// keyword of passwordKey, in bytes under its case folding, plus one.
func TestKeywordSlackCoversTheKeywords(t *testing.T) {
	re, err := syntax.Parse(passwordKey, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	if re.Op != syntax.OpConcat || len(re.Sub) == 0 {
		t.Fatalf("passwordKey is %v, not keywords then a separator", re.Op)
	}
	n, ok := maxBytes(re.Sub[0])
	if !ok || n+1 > keywordSlack {
		t.Fatalf("the widest keyword of %s is %d bytes (bounded %v), keywordSlack %d", re.Sub[0], n, ok, keywordSlack)
	}
	t.Logf("widest keyword: %d bytes", n)
}

// maxBytes is the most bytes re can match, and whether that is bounded.
func maxBytes(re *syntax.Regexp) (int, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return 0, true
	case syntax.OpLiteral:
		n := 0
		for _, c := range re.Rune {
			w := utf8.RuneLen(c)
			if re.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(c); f != c; f = unicode.SimpleFold(f) {
					w = max(w, utf8.RuneLen(f))
				}
			}
			n += w
		}
		return n, true
	case syntax.OpCharClass:
		w := 0
		for i := 1; i < len(re.Rune); i += 2 {
			w = max(w, utf8.RuneLen(min(re.Rune[i], unicode.MaxRune)))
		}
		return w, true
	case syntax.OpCapture, syntax.OpQuest:
		return maxBytes(re.Sub[0])
	case syntax.OpConcat, syntax.OpAlternate:
		n := 0
		for _, s := range re.Sub {
			m, ok := maxBytes(s)
			if !ok {
				return 0, false
			}
			if re.Op == syntax.OpConcat {
				n += m
			} else {
				n = max(n, m)
			}
		}
		return n, true
	}
	return 0, false
}

// longValueInputs are TestLinearTime's shapes for values of any length:
// one bare run holding a keyword every few bytes (each keyword's value
// runs to the run's end: quadratic without valueNext's resume), the same
// after an unterminated quote, quotes of both kinds alternating, many
// keywords then one unterminated quote, a long value then keywords.
var longValueInputs = map[string]func(n int) string{
	"bare run of keywords":           func(n int) string { return strings.Repeat("pwd=x", n/5) },
	"bare run of long keywords":      func(n int) string { return strings.Repeat("client_secret=", n/14) },
	"keywords then a quote":          func(n int) string { return strings.Repeat("pwd=", n/4-1) + `"` + strings.Repeat("a", 3) },
	"quote then keywords":            func(n int) string { return `password="` + strings.Repeat("pwd=x", n/5-2) },
	"alternating quotes":             func(n int) string { return strings.Repeat(`pwd="x pwd='x `, n/14) },
	"keywords, one unterminated":     func(n int) string { return strings.Repeat(`secret: "`, n/9) },
	"keyword spaced past the slack":  func(n int) string { return strings.Repeat("pwd="+strings.Repeat("x", 60), n/64) },
	"escapes after a quoted keyword": func(n int) string { return strings.Repeat(`pwd="\"pwd='\'`, n/14) },
}

// TestWriterLongValueWhole: a value of about 10 KiB written to a Writer in
// pieces, with and without a newline before it, is replaced whole, as one
// Redact of the whole text replaces it (the Writer cut between the key and
// the value when the value straddled its cut, and the value went out as
// it was); a bare one of 100 KiB too.
func TestWriterLongValueWhole(t *testing.T) {
	r := newBuiltin(t)
	v := strings.Repeat("Zm9vYmFy", 10<<10/8)
	pad := strings.Repeat("log text ", 3000)
	for _, c := range []struct{ in, want string }{
		{pad + "password: " + v + " done", pad + "password: [REDACTED:password] done"},
		{pad + "\n" + `{"secret": "` + v + `"}` + "\n" + pad, pad + "\n" + `{"secret": "[REDACTED:password]"}` + "\n" + pad},
		{pad + "api_key=" + v + "\n" + pad, pad + "api_key=[REDACTED:password]\n" + pad},
		// A bare value is held while it runs on (up to about 240 KiB).
		{pad + "pwd=" + strings.Repeat(v, 10) + " " + pad, pad + "pwd=[REDACTED:password] " + pad},
	} {
		for _, size := range []int{1, 100, 4096, 20 << 10} {
			var out bytes.Buffer
			w := r.NewWriter(&out)
			for in := c.in; in != ""; {
				k := min(size, len(in))
				if _, err := w.Write([]byte(in[:k])); err != nil {
					t.Fatal(err)
				}
				in = in[k:]
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != c.want {
				i := 0
				for i < min(len(got), len(c.want)) && got[i] == c.want[i] {
					i++
				}
				t.Errorf("%d-byte writes of %d bytes: differs from byte %d: %.60q…, want %.60q…", size, len(c.in), i, got[i:], c.want[i:])
			}
		}
	}
}
