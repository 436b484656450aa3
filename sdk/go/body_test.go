package maiden

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"
)

// allBytes is n bytes cycling through all 256 values.
func allBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestBodyEncoding(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, ""},
		{"ascii unchanged", []byte(`{"a":[1,2]}`), `{"a":[1,2]}`},
		{"high bytes take two", []byte{0x00, 0x7f, 0x80, 0xbf, 0xc0, 0xff}, "\x00\x7f\u0080\u00bf\u00c0\u00ff"},
		{"every byte value", allBytes(256), latin1(allBytes(256))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			enc := encodeBody(tt.in)
			if string(enc) != tt.want {
				t.Fatalf("encodeBody = %q, want %q", enc, tt.want)
			}
			if !utf8.Valid(enc) {
				t.Fatal("encoding is not UTF-8")
			}
			dec, ok := decodeBody(enc)
			if !ok || !bytes.Equal(dec, tt.in) {
				t.Fatalf("decodeBody = %v %q, want %q", ok, dec, tt.in)
			}
		})
	}
}

// latin1 is the reference encoding: each byte is the rune of that value.
func latin1(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		sb.WriteRune(rune(c))
	}
	return sb.String()
}

// TestDecodeBodyRefuses feeds decodeBody what a broken or hostile host could
// put in the response body: characters above U+00FF, truncated sequences,
// stray continuation bytes. Each must be refused, never mis-decoded.
func TestDecodeBodyRefuses(t *testing.T) {
	for _, s := range []string{"\u0100", "ok \u20ac", "\U0001F600", "\xc3", "a\xc2", "\x80", "\xc3\xc3", "\xff", strings.Repeat("x", 20) + "\u0100"} {
		t.Run(strings.ToValidUTF8(s, "?"), func(t *testing.T) {
			if b, ok := decodeBody([]byte(s)); ok {
				t.Errorf("decodeBody(%q) = %q, want refusal", s, b)
			}
		})
	}
}

func FuzzBodyRoundTrip(f *testing.F) {
	f.Add([]byte("hello"))
	f.Add(allBytes(300))
	f.Fuzz(func(t *testing.T, b []byte) {
		dec, ok := decodeBody(encodeBody(b))
		if !ok || !bytes.Equal(dec, b) {
			t.Fatalf("round trip of %q gave %v %q", b, ok, dec)
		}
		// Whatever decodes must be the only encoding of its bytes.
		if d, ok := decodeBody(b); ok && !bytes.Equal(encodeBody(d), b) {
			t.Fatalf("%q decodes to %q, which encodes differently", b, d)
		}
	})
}

func TestLiftFetchResultBinaryBody(t *testing.T) {
	want := allBytes(1000)
	for _, tt := range []struct {
		name       string
		wire       []byte
		stringBody bool
	}{
		{"0.1.0 list<u8>", want, false},
		{"0.2.0 string", encodeBody(want), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeMemory()
			body := m.place(tt.wire)
			ret, area := m.area(fetchResultSize)
			area[4] = 200
			put32(area[16:], body)
			put32(area[20:], uint32(len(tt.wire)))
			got, err := liftFetchResult(m, ret, tt.stringBody)
			if err != nil || !bytes.Equal(got.Body, want) {
				t.Fatalf("body %v, %q", err, got.Body)
			}
		})
	}
	t.Run("0.2.0 malformed", func(t *testing.T) {
		m := newFakeMemory()
		bad := []byte("ok \u20ac")
		body := m.place(bad)
		ret, area := m.area(fetchResultSize)
		put32(area[16:], body)
		put32(area[20:], uint32(len(bad)))
		if _, err := liftFetchResult(m, ret, true); err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("err = %v, want a malformed-result error", err)
		}
	})
}

type outStruct struct {
	Temp float64 `json:"temp" jsonschema:"degrees"`
}

type customJSON struct{}

func (customJSON) MarshalJSON() ([]byte, error) { return []byte("1"), nil }

func outputSchemaFor[Out any]() string {
	return outputSchemaOf(Func("t", func(context.Context, struct{}) (Out, error) {
		var o Out
		return o, nil
	}))
}

func TestFuncOutputSchema(t *testing.T) {
	want := SchemaFor[outStruct]()
	for _, tt := range []struct {
		name, got, want string
	}{
		{"struct", outputSchemaFor[outStruct](), want},
		{"pointer to struct", outputSchemaFor[*outStruct](), want},
		{"string has none", outputSchemaFor[string](), ""},
		{"slice has none", outputSchemaFor[[]outStruct](), ""},
		{"map has none", outputSchemaFor[map[string]int](), ""},
		{"custom JSON has none", outputSchemaFor[customJSON](), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("output schema %q, want %q", tt.got, tt.want)
			}
		})
	}
	if !strings.Contains(want, `"temp"`) {
		t.Errorf("struct schema %q lacks its field", want)
	}
	if got := outputSchemaOf(plainTool{}); got != "" {
		t.Errorf("a Tool without OutputSchema declares %q", got)
	}
}

type plainTool struct{}

func (plainTool) Describe() string { return "" }
func (plainTool) Schema() string   { return "{}" }
func (plainTool) Execute(context.Context, []byte) ([]byte, error) {
	return nil, nil
}

// BenchmarkBodyCodec compares the two encodings considered for 0.2.0 bodies
// on a 2 MiB body, natively (run with GOOS=wasip1 under a wasm runner for
// guest numbers): text (all ASCII, the common case) and binary (all 256
// values). ns/op and the encoded size decide.
func BenchmarkBodyCodec(b *testing.B) {
	text := bytes.Repeat([]byte(`{"name":"value","n":12345},`), (2<<20)/27)
	binary := allBytes(2 << 20)
	for _, body := range []struct {
		name string
		b    []byte
	}{{"text", text}, {"binary", binary}} {
		b.Run("latin1/decode/"+body.name, func(b *testing.B) {
			enc := encodeBody(body.b)
			b.ReportMetric(float64(len(enc))/float64(len(body.b)), "wire/byte")
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				if _, ok := decodeBody(enc); !ok {
					b.Fatal("decode")
				}
			}
		})
		b.Run("base64/decode/"+body.name, func(b *testing.B) {
			enc := []byte(base64.StdEncoding.EncodeToString(body.b))
			b.ReportMetric(float64(len(enc))/float64(len(body.b)), "wire/byte")
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				out := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
				if _, err := base64.StdEncoding.Decode(out, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("latin1/encode/"+body.name, func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				encodeBody(body.b)
			}
		})
		b.Run("base64/encode/"+body.name, func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				base64.StdEncoding.EncodeToString(body.b)
			}
		})
	}
}
