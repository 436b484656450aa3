package store

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzScanJSON holds scanJSON to encoding/json: valid exactly when
// json.Valid says so, and compact exactly when json.Compact would not
// change the value.
func FuzzScanJSON(f *testing.F) {
	for _, s := range []string{
		`null`, ` {"a":1} `, `{"a":[1,2.5e-3,-0,"x\"\\\/\b\f\n\r\t\u00e9"],"b":{}}`, `[]`, `[1,]`, `{"a"}`, `01`, `-`, `1.`,
		`1e`, `1e+`, `"\u12"`, `"\x"`, "\"\x01\"", "\"\xff\xfe\"", `tru`, `true false`, `{"a":1,}`, `[1 2]`, "[\n1]",
		`"unterminated`, `{"a":1}x`, `1.5E+10`, `-12.0e-0`, ``, ` `, `[[[{"a":[{}]}]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid, compact := scanJSON(b)
		if want := json.Valid(b); valid != want {
			t.Fatalf("scanJSON(%q) valid = %v, json.Valid = %v", b, valid, want)
		}
		if !valid {
			return
		}
		var c bytes.Buffer
		if err := json.Compact(&c, b); err != nil {
			t.Fatal(err)
		}
		if want := bytes.Equal(c.Bytes(), b); compact != want {
			t.Fatalf("scanJSON(%q) compact = %v; json.Compact gives %q", b, compact, c.Bytes())
		}
	})
}

// TestScanJSONDepth: nesting as deep as encoding/json allows is valid,
// one level deeper is not (as for json.Valid).
func TestScanJSONDepth(t *testing.T) {
	for _, d := range []int{maxJSONDepth, maxJSONDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			closer := map[string]string{"[": "]", `{"a":`: "}"}[open]
			b := []byte(strings.Repeat(open, d) + "1" + strings.Repeat(closer, d))
			if valid, _ := scanJSON(b); valid != json.Valid(b) || valid != (d <= maxJSONDepth) {
				t.Fatalf("depth %d of %s: scanJSON %v, json.Valid %v", d, open, valid, json.Valid(b))
			}
		}
	}
}

func BenchmarkScanJSON(b *testing.B) {
	body := auditBody(map[string]any{"rendered": "weather --city=Paris --units=metric", "cards": []string{"card_0123456789abcdef01234567"}})
	b.Run("scanJSON", func(b *testing.B) {
		for b.Loop() {
			if ok, _ := scanJSON(body); !ok {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
}
