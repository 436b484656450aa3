package redact

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestMarkersNotRedactedAgain: a marker already in the text (another
// detector's, or the egress gate's [REDACTED:NAME] for a declared
// secret) is never replaced again, even where a detector would take it
// for a secret (a quoted password value), so a second pass changes
// nothing and counts nothing: the marker keeps the name of what it hid.
func TestMarkersNotRedactedAgain(t *testing.T) {
	r := newBuiltin(t)
	for _, in := range []string{
		`{"password": "[REDACTED:github-token]"}`,
		`client_secret='[REDACTED:GH_TOKEN]'`,
		`{"api_key": "[REDACTED:password]", "token": "` + ghp + `"}`,
	} {
		once, _ := r.Count(in)
		twice, n := r.Count(once)
		if twice != once || n != 0 {
			t.Errorf("Count(Redact(%q)) = %q, %d; want %q, 0", in, twice, n, once)
		}
	}
	for in, want := range map[string]string{
		`{"password": "[REDACTED:github-token]"}`:                    `{"password": "[REDACTED:github-token]"}`,
		`client_secret='[REDACTED:GH_TOKEN]'`:                        `client_secret='[REDACTED:GH_TOKEN]'`,
		`{"api_key": "[REDACTED:password]", "token": "` + ghp + `"}`: `{"api_key": "[REDACTED:password]", "token": "[REDACTED:github-token]"}`,
	} {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMatchesOverlappingByOneByteMerged: two matches sharing only their
// last and first byte are replaced as one span; neither is cut short and
// no byte of either is written twice.
func TestMatchesOverlappingByOneByteMerged(t *testing.T) {
	r, err := New([]Pattern{{Name: "head", Expr: `abc`}, {Name: "tail", Expr: `cde`}}, false)
	if err != nil {
		t.Fatal(err)
	}
	got, n := r.Count("x abcde y")
	if want := "x [REDACTED:head] y"; got != want || n != 1 {
		t.Errorf("Count = %q, %d; want %q, 1", got, n, want)
	}
}

// TestMispairedQuoteRepaired: a quote that opens no JSON string (a stray
// inch mark, then a Windows path whose backslash is no JSON escape) is
// paired anew, so the escaped secret in the JSON string after it is still
// decoded and redacted.
func TestMispairedQuoteRepaired(t *testing.T) {
	r := newBuiltin(t)
	in := `a 5" screen at C:\dir, then "\u0067hp_` + ghp[4:] + `"`
	want := `a 5" screen at C:\dir, then "[REDACTED:github-token]"`
	if got := r.Redact(in); got != want {
		t.Errorf("Redact(%q) = %q, want %q", in, got, want)
	}
}

// TestReencodedStringKeepsHTML: a JSON string re-encoded because it held
// an escaped secret keeps its other characters as they were written: <, >
// and & are not turned into \u003c, \u003e, \u0026.
func TestReencodedStringKeepsHTML(t *testing.T) {
	r := newBuiltin(t)
	in := `{"html":"<b>a & b</b> \u0067hp_` + ghp[4:] + `"}`
	want := `{"html":"<b>a & b</b> [REDACTED:github-token]"}`
	if got := r.Redact(in); got != want {
		t.Errorf("Redact(%q) = %q, want %q", in, got, want)
	}
}

// onceFailing fails its first write and records any later one.
type onceFailing struct {
	calls int
	later bytes.Buffer
}

func (w *onceFailing) Write(p []byte) (int, error) {
	w.calls++
	if w.calls == 1 {
		return 0, errors.New("disk full")
	}
	return w.later.Write(p)
}

// TestWriterStopsAtItsFirstError: once the underlying writer failed, a
// Writer writes nothing more to it, accepts no byte (0 and the error)
// and Close returns the same error.
func TestWriterStopsAtItsFirstError(t *testing.T) {
	u := &onceFailing{}
	w := newBuiltin(t).NewWriter(u)
	if _, err := w.Write(bytes.Repeat([]byte("x\n"), 2*StreamWindow)); err == nil || err.Error() != "disk full" {
		t.Fatalf("first Write: %v, want disk full", err)
	}
	n, err := w.Write(bytes.Repeat([]byte("y\n"), 2*StreamWindow))
	if n != 0 || err == nil || err.Error() != "disk full" {
		t.Errorf("Write after the error = %d, %v; want 0, disk full", n, err)
	}
	if err := w.Close(); err == nil || err.Error() != "disk full" {
		t.Errorf("Close = %v, want disk full", err)
	}
	if u.calls != 1 || u.later.Len() != 0 {
		t.Errorf("the underlying writer was called %d times (%d bytes after its error); want once", u.calls, u.later.Len())
	}
}

// TestLongValueRedactedWhole: a password value is replaced whole however
// many bytes it takes (and of any length: longvalue_test.go): 512 two-byte characters,
// 300 four-byte ones (1200 bytes, past the 1200-byte window the key is
// looked for in), 600 escaped quotes, a bare value of 400 four-byte
// characters; no tail of the value and no piece of a character is left.
func TestLongValueRedactedWhole(t *testing.T) {
	r := newBuiltin(t)
	for in, want := range map[string]string{
		`password="` + strings.Repeat("é", 512) + `"`:       `password="[REDACTED:password]"`,
		`password="` + strings.Repeat("😀", 300) + `" x`:     `password="[REDACTED:password]" x`,
		`{"secret": "` + strings.Repeat(`\"`, 500) + `"}`:   `{"secret": "[REDACTED:password]"}`,
		"password: " + strings.Repeat("😀", 400) + "\n":      "password: [REDACTED:password]\n",
		"api_key:" + strings.Repeat(" ", 1100) + "hunter22": "api_key:" + strings.Repeat(" ", 1100) + "[REDACTED:password]",
		"password: " + strings.Repeat("😀", 513):             "password: [REDACTED:password]",
	} {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%.24q…, %d bytes) ends %q, want it to end %q", in, len(in), got[max(0, len(got)-32):], want[max(0, len(want)-32):])
		}
	}
}

// TestWriterNeverCutsOneByteShortOfAMatch: a token ending one byte past
// where the Writer would cut (its held-back window's edge, no newline
// before it) is not split there: the cut moves to the token's start, and
// the stream comes out as one Redact of the whole.
func TestWriterNeverCutsOneByteShortOfAMatch(t *testing.T) {
	rd := newBuiltin(t)
	// Written at once, 2·StreamWindow bytes: the cut falls at StreamWindow,
	// and the token ends at StreamWindow+1.
	text := strings.Repeat("x", StreamWindow-len(ghp)) + " " + ghp + " " + strings.Repeat("y", StreamWindow-2)
	var out bytes.Buffer
	w := rd.NewWriter(&out)
	if _, err := w.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if want := rd.Redact(text); out.String() != want {
		i := strings.Index(out.String(), "ghp_")
		t.Errorf("the stream came out as %q… around the token, want %q…", out.String()[max(0, i-2):min(out.Len(), i+len(ghp)+2)], want[StreamWindow-len(ghp)-2:StreamWindow-len(ghp)+22])
	}
}

// TestWriterCarriesAStringOverTwoForcedCuts: a JSON string longer than
// twice the most the Writer holds is cut anyway, twice; the string is
// still known to be open after each cut, so an escaped token in its last
// piece is decoded and redacted, also when more lines follow the string
// (the Writer then cuts after the string, not at its closing quote).
func TestWriterCarriesAStringOverTwoForcedCuts(t *testing.T) {
	rd := newBuiltin(t)
	tail := "\n" + strings.Repeat("z", 2*StreamWindow) + "\n"
	for _, after := range []string{"", tail} {
		text := `{"out":"` + strings.Repeat(`a\n`, streamMax) + ` \u0067hp_` + ghp[4:] + `"}` + after
		var out bytes.Buffer
		w := rd.NewWriter(&out)
		for i := 0; i < len(text); i += 4096 {
			if _, err := w.Write([]byte(text[i:min(len(text), i+4096)])); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got := strings.TrimSuffix(out.String(), after)
		want := `a\na\n [REDACTED:github-token]"}`
		if got = got[max(0, len(got)-len(want)):]; got != want || strings.Contains(out.String(), ghp[4:]) {
			t.Errorf("with %d bytes after the string: it ends %q, want %q", len(after), got, want)
		}
	}
}

// TestSecretGroupAtTheStart: a pattern's "secret" group that matched at
// the very start of the text is still the part replaced; the rest of the
// match is kept.
func TestSecretGroupAtTheStart(t *testing.T) {
	r, err := New([]Pattern{{Name: "internal-host", Expr: `(?P<secret>[a-z0-9-]+)\.corp\.example\b`}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Redact("db-7.corp.example is up"), "[REDACTED:internal-host].corp.example is up"; got != want {
		t.Errorf("Redact = %q, want %q", got, want)
	}
}

// TestWriterHoldsWhatALaterMatchFollows: a token that ends a write does
// not let the Writer write out the text before it inside its held-back
// window: that text may be the start of a secret the token is part of
// (here a quoted password value closed by the next write).
func TestWriterHoldsWhatALaterMatchFollows(t *testing.T) {
	rd := newBuiltin(t)
	first := strings.Repeat("x", 2*StreamWindow) + " password='abc1 " + ghp
	var out bytes.Buffer
	w := rd.NewWriter(&out)
	for _, p := range []string{first, "'\n"} {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String()[2*StreamWindow:], " password='[REDACTED:password]'\n"; got != want {
		t.Errorf("the stream ends %q, want %q", got, want)
	}
}

// TestEscapedSecretAfterALeadingBackslash: text whose first byte is a
// backslash still has its JSON strings decoded.
func TestEscapedSecretAfterALeadingBackslash(t *testing.T) {
	r := newBuiltin(t)
	in := `\ {"t":"\u0067hp_` + ghp[4:] + `"}`
	if got, want := r.Redact(in), `\ {"t":"[REDACTED:github-token]"}`; got != want {
		t.Errorf("Redact(%q) = %q, want %q", in, got, want)
	}
}
