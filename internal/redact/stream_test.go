package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// streamText is ~100 KiB of log text with every fixture, raw and inside
// JSON strings (escaped), at places that chunking will split.
func streamText(r *rand.Rand) (string, []string) {
	secrets := []string{awsID, ghp, ghPAT, slack, stripe, google, jwt, pem}
	var b strings.Builder
	for b.Len() < 100<<10 {
		b.WriteString(strings.Repeat("ordinary log line with \"quotes\" and a path C:\\tmp\n", 1+r.IntN(40)))
		s := secrets[r.IntN(len(secrets))]
		switch r.IntN(3) {
		case 0:
			b.WriteString("raw " + s + " end\n")
		case 1:
			enc, _ := json.Marshal(map[string]string{"out": "x " + s + " y"})
			b.Write(enc)
			b.WriteString("\n")
		case 2: // every character \u-escaped, no newline
			b.WriteString(`{"out":"`)
			for _, c := range s {
				b.WriteString(`\u00`)
				b.WriteString(hex2(byte(c)))
			}
			b.WriteString(`"} `)
		}
	}
	return b.String(), []string{awsID[4:], ghp[4:], ghPAT[11:], slack[5:], stripe[8:], google[4:], jwt[40:], pemBody[:30]}
}

func hex2(c byte) string {
	const h = "0123456789abcdef"
	return string([]byte{h[c>>4], h[c&15]})
}

func TestWriterChunked(t *testing.T) {
	rd := newBuiltin(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 5))
	for round := range 8 {
		text, parts := streamText(r)
		var out bytes.Buffer
		w := rd.NewWriter(&out)
		for rest := text; rest != ""; {
			n := min(len(rest), 1+r.IntN(9000))
			if _, err := w.Write([]byte(rest[:n])); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		for _, p := range parts {
			if strings.Contains(got, p) {
				i := strings.Index(got, p)
				t.Fatalf("round %d: %q survived: ...%q...", round, p, got[max(0, i-80):min(len(got), i+80)])
			}
		}
		if want := rd.Redact(text); got != want {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Fatalf("round %d: the stream differs from the whole at byte %d:\n got ...%q\nwant ...%q", round, i, got[max(0, i-60):min(len(got), i+60)], want[max(0, i-60):min(len(want), i+60)])
		}
	}
}

// TestWriterWithoutNewlines: text with no line breaks (a minified JSON
// document, one long log line) is cut wherever the window ends, so the cut
// must move off any secret and any JSON string it would split: the stream
// is redacted exactly as the whole text is, whatever the chunking.
func TestWriterWithoutNewlines(t *testing.T) {
	rd := newBuiltin(t)
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 7))
		text, parts := streamText(r)
		text = strings.ReplaceAll(text, "\n", " ")
		var out bytes.Buffer
		w := rd.NewWriter(&out)
		for rest := text; rest != ""; {
			n := min(len(rest), 1+r.IntN(3*StreamWindow))
			if _, err := w.Write([]byte(rest[:n])); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		for _, p := range parts {
			if i := strings.Index(got, p); i >= 0 {
				t.Fatalf("seed %d: %q survived: ...%q...", seed, p, got[max(0, i-80):min(len(got), i+80)])
			}
		}
		if want := rd.Redact(text); got != want {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Fatalf("seed %d: the stream differs from the whole at byte %d:\n got ...%q\nwant ...%q", seed, i, got[max(0, i-60):min(len(got), i+60)], want[max(0, i-60):min(len(want), i+60)])
		}
	}
}

// TestWriterLongStrings: a JSON string is not cut while it is open (up to
// 256 KiB), so an escaped secret at its start is decoded with the rest of
// it; one longer than that is cut inside and the next piece re-opens it, so
// an escaped secret after the cut, or across it, is still decoded.
func TestWriterLongStrings(t *testing.T) {
	rd := newBuiltin(t)
	filler := func(n int) string { return strings.Repeat(`a\n`, n/3) } // n bytes of escaped text
	token := `\u0067hp_` + ghp[4:]
	for name, text := range map[string]string{
		"at the start of a 64 KiB string":          `{"out":"` + token + filler(64<<10) + `","n":1}`,
		"past the 256 KiB a string is held":        `{"out":"` + filler(300<<10) + token + `","n":1}`,
		"just before the 256 KiB a string is held": `{"out":"` + filler(streamMax-8) + token + `","n":1}`,
		"just after the 256 KiB a string is held":  `{"out":"` + filler(streamMax+StreamWindow/2) + token + `","n":1}`,
	} {
		var out bytes.Buffer
		w := rd.NewWriter(&out)
		for rest := text; rest != ""; {
			n := min(len(rest), 4096)
			w.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		w.Close()
		if got := out.String(); strings.Contains(got, ghp[4:20]) || !json.Valid(out.Bytes()) {
			i := max(0, strings.Index(got, `\u0067`))
			t.Errorf("escaped token %s: it survived or the JSON broke (%d bytes): ...%q...", name, out.Len(), got[max(0, i-20):min(len(got), i+80)])
		}
	}
}

// TestWriterHoldsBackTheWindow: whatever is written, the last StreamWindow
// bytes given are not written out before Close (a secret still arriving may
// be in them), inside a JSON string longer than the writer may hold too.
func TestWriterHoldsBackTheWindow(t *testing.T) {
	rd := newBuiltin(t)
	for name, text := range map[string]string{
		"one long line":                strings.Repeat("ordinary words without a break ", 10<<10),
		"a string longer than is held": `{"out":"` + strings.Repeat(`a\n`, 100<<10) + `"}`,
	} {
		var out bytes.Buffer
		w := rd.NewWriter(&out)
		written := 0
		for rest := text; rest != ""; {
			n := min(len(rest), 1000)
			w.Write([]byte(rest[:n]))
			rest, written = rest[n:], written+n
			if out.Len() > max(0, written-StreamWindow) {
				t.Fatalf("%s: %d bytes written out of %d given, more than all but the last %d", name, out.Len(), written, StreamWindow)
			}
		}
		w.Close()
		if out.String() != text {
			t.Fatalf("%s: the text without secrets came out changed", name)
		}
	}
}

// A JSON string longer than StreamWindow, with an escaped secret near its
// end, written one byte at a time: the cut never lands inside it.
func TestWriterLongString(t *testing.T) {
	rd := newBuiltin(t)
	text := `{"out":"` + strings.Repeat(`a\n`, 3*StreamWindow) + `\u0067hp_` + ghp[4:] + `"}`
	var out bytes.Buffer
	w := rd.NewWriter(&out)
	for i := range len(text) {
		w.Write([]byte{text[i]})
	}
	w.Close()
	if strings.Contains(out.String(), ghp[4:]) || !json.Valid(out.Bytes()) {
		t.Fatalf("escaped token survived or JSON broken (%d bytes)", out.Len())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterError(t *testing.T) {
	w := newBuiltin(t).NewWriter(failWriter{})
	w.Write(bytes.Repeat([]byte("x\n"), StreamWindow*2))
	if _, err := w.Write([]byte("y")); err == nil || w.Close() == nil {
		t.Fatal("the underlying error was not returned")
	}
}
