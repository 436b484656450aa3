package store

import (
	"bytes"
	"encoding/binary"
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
	t.Parallel()
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
	// A call-admitted record's body as the call path writes it (501
	// bytes, mostly digests).
	call := []byte(`{"rendered":"--message=hi","card":"card_574e799e2b816ddef2c21ed3","component":"sha256:069e2817e2ff91f28f3edf72e92feabde3f7f5bb3ebfd3caced2b88fa613b957","component_local":true,"schema":"sha256:1d885826779f505d00a97ed363a7c057f773d618fd021f7e7a3991c3a2b691f6","decision":{"allow":true,"card":"card_574e799e2b816ddef2c21ed3","bound":"lower-positive","grant":"tool:invoke echo --message=*","wallet":"0bb4f18c6d62c579","component":"sha256:069e2817e2ff91f28f3edf72e92feabde3f7f5bb3ebfd3caced2b88fa613b957"}}`)
	b.Run("scanJSON-call", func(b *testing.B) {
		for b.Loop() {
			if ok, _ := scanJSON(call); !ok {
				b.Fatal("invalid")
			}
		}
	})
}

// TestPlain8 holds the eight-byte test of a string's scan to the byte
// test, for every byte value in every position of a word of otherwise
// plain bytes, or of bytes it must stop at.
func TestPlain8(t *testing.T) {
	t.Parallel()
	stop := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }
	for _, fill := range []byte{'a', 0x7f, 0x80, 0xff, '"', 0x1f, '\\', 0x20, '!', '#', '[', ']'} {
		for pos := range 8 {
			for c := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				want := true
				for _, x := range w {
					want = want && !stop(x)
				}
				if got := plain8(binary.LittleEndian.Uint64(w[:])); got != want {
					t.Fatalf("plain8(%q) = %v, want %v", w, got, want)
				}
			}
		}
	}
}
