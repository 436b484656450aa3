package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/wasmtime"
	"github.com/maiden-run/maiden/wit"
)

// TestStringBodies runs bodyfetcher, a maiden:tool@0.2.0 tool, whose input
// is the request body string: the host must hand the fetch the bytes it
// stands for (one character per byte) and encode the response body the same
// way.
func TestStringBodies(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "bodyfetcher")
	for _, tt := range []struct {
		name, input string
		want        []byte
	}{
		{"ascii", `{"a":1}`, []byte(`{"a":1}`)},
		{"every high byte", latin1(allBytes(256)), allBytes(256)},
		{"empty", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []byte
			echo := func(ctx context.Context, req FetchRequest) (*FetchResponse, *FetchError) {
				got = req.Body
				return &FetchResponse{Status: 200, Body: req.Body}, nil
			}
			out, err := sb.Execute(context.Background(), Call{Path: path, Limits: defaultLimits, Input: tt.input, Fetch: echo})
			if err != nil || out.Failure != nil {
				t.Fatalf("got %+v, %v", out, err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("fetch saw body %q, want %q", got, tt.want)
			}
			if out.Output != "200 "+tt.input {
				t.Errorf("tool saw response body %q, want %q", out.Output, "200 "+tt.input)
			}
		})
	}
}

// TestHostileStringBody: a 0.2.0 tool that sends a body string that stands
// for no bytes, or for more than MaxRequestBody, gets a fetch error (failed,
// naming the problem) and nothing is sent; the call goes on (no trap).
func TestHostileStringBody(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "bodyfetcher")
	lim := Limits{Timeout: 10 * defaultLimits.Timeout, Memory: 64 << 20}
	for _, tt := range []struct {
		name, input, want string
	}{
		{"character above U+00FF", "price: 5 \u20ac", "failed: request body: the character at byte offset 9 is not in U+0000..U+00FF"},
		{"emoji", "\U0001F600", "failed: request body: the character at byte offset 0 is not in U+0000..U+00FF"},
		{"over the cap", "BIG", "failed: request body is 5242880 bytes; the limit is 2097152"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sent := false
			fetch := func(ctx context.Context, req FetchRequest) (*FetchResponse, *FetchError) {
				sent = true
				return &FetchResponse{Status: 200}, nil
			}
			out, err := sb.Execute(context.Background(), Call{Path: path, Limits: lim, Input: tt.input, Fetch: fetch})
			if err != nil {
				t.Fatal(err)
			}
			if out.Failure == nil || out.Failure.Kind != KindTool || !strings.HasPrefix(out.Failure.Message, tt.want) {
				t.Fatalf("got %+v, want tool error %q", out.Failure, tt.want)
			}
			if sent {
				t.Error("the request was sent")
			}
		})
	}
}

// TestBothContractVersionsLoad: a 0.1.0 tool (fetcher) and a 0.2.0 tool
// (bodyfetcher) load side by side in one sandbox, and each gets bodies in
// its own representation from the same FetchFunc.
func TestBothContractVersionsLoad(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	body := []byte("caf\xc3\xa9") // UTF-8 text with a byte >= 0x80
	fetch := func(ctx context.Context, req FetchRequest) (*FetchResponse, *FetchError) {
		return &FetchResponse{Status: 200, Body: body}, nil
	}
	for _, tt := range []struct{ tool, input, want string }{
		{"fetcher", "https://x.test/", "200 café"}, // 0.1.0: list<u8>, the raw UTF-8
		{"bodyfetcher", "", "200 caf\u00c3\u00a9"}, // 0.2.0: one character per byte
	} {
		t.Run(tt.tool, func(t *testing.T) {
			out, err := sb.Execute(context.Background(), Call{Path: testkit.Component(t, tt.tool), Limits: defaultLimits, Input: tt.input, Fetch: fetch})
			if err != nil || out.Failure != nil {
				t.Fatalf("got %+v, %v", out, err)
			}
			if out.Output != tt.want {
				t.Errorf("output %q, want %q", out.Output, tt.want)
			}
		})
	}
}

func TestContractVersions(t *testing.T) {
	t.Parallel()
	str := func(name string) wasmtime.Item {
		return wasmtime.Item{Name: name, Kind: wasmtime.ItemFunc, Type: "func() -> string", Result: "string"}
	}
	exec := wasmtime.Item{Name: "execute", Kind: wasmtime.ItemFunc, Type: "func(input: string) -> result<string, string>", Params: []string{"string"}, Result: "result<string, string>"}
	base := []wasmtime.Item{str("describe"), str("schema"), exec}
	for _, tt := range []struct {
		name    string
		imports []string
		exports []wasmtime.Item
		bad     string // "" means accepted
	}{
		{"0.1.0", []string{wit.V010.HostInterface}, base, ""},
		{"0.2.0", []string{wit.V020.HostInterface}, append(base, str("output-schema")), ""},
		{"both host versions", []string{wit.V010.HostInterface, wit.V020.HostInterface}, base, ""},
		{"0.3.0", []string{wit.V030.HostInterface}, append(base, str("output-schema")), ""},
		{"unknown host version", []string{"maiden:tool/host@0.4.0"}, base, `imports "maiden:tool/host@0.4.0"`},
		{"output-schema mistyped", nil, append(base, wasmtime.Item{Name: "output-schema", Kind: wasmtime.ItemFunc, Type: "func(x: string) -> string", Params: []string{"string"}, Result: "string"}),
			`export "output-schema" has type func(x: string) -> string, want output-schema: func() -> string`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var imps []wasmtime.Item
			for _, n := range tt.imports {
				imps = append(imps, wasmtime.Item{Name: n, Kind: wasmtime.ItemInstance})
			}
			err := checkImports(imps)
			if err == nil {
				err = checkExports(tt.exports)
			}
			switch {
			case tt.bad == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.bad != "" && (err == nil || !strings.Contains(err.Error(), tt.bad)):
				t.Errorf("err = %v, want one containing %q", err, tt.bad)
			}
		})
	}
	if !hasOutputSchema([]wasmtime.Item{str("output-schema")}) || hasOutputSchema(base) {
		t.Error("hasOutputSchema is wrong")
	}
}

func allBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func latin1(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		sb.WriteRune(rune(c))
	}
	return sb.String()
}

func TestBodyCodec(t *testing.T) {
	t.Parallel()
	for _, b := range [][]byte{nil, []byte("plain"), allBytes(256), allBytes(MaxRequestBody)} {
		enc := encodeBody(b)
		if enc != latin1(b) || !utf8.ValidString(enc) {
			t.Fatalf("encodeBody(%.20q...) is not latin-1 in UTF-8", b)
		}
		dec, ferr := decodeBody(enc)
		if ferr != nil || !bytes.Equal(dec, b) {
			t.Fatalf("round trip of %d bytes: %v", len(b), ferr)
		}
	}
	// Limits: every byte >= 0x80 at exactly the cap is 4 MiB of string and
	// allowed; one more byte is not, however it is encoded.
	for _, tt := range []struct {
		name string
		s    string
		ok   bool
	}{
		{"cap of high bytes", strings.Repeat("\u00ff", MaxRequestBody), true},
		{"cap+1 of ascii", strings.Repeat("a", MaxRequestBody+1), false},
		{"cap+1 of high bytes", strings.Repeat("\u00ff", MaxRequestBody+1), false},
		{"far over the cap", strings.Repeat("a", 5*MaxRequestBody), false},
		{"U+0100", "\u0100", false},
		{"truncated", "\xc3", false},
		{"lone continuation", "\x80", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ferr := decodeBody(tt.s)
			if (ferr == nil) != tt.ok || (ferr != nil && ferr.Kind != FetchFailed) {
				t.Errorf("decodeBody: %v, want ok=%v", ferr, tt.ok)
			}
		})
	}
}

// TestJSStringBodies: a JS tool built against 0.2.0 reads a binary response
// body byte by byte with charCodeAt, and its UTF-8 request body arrives as
// the bytes it stands for.
func TestJSStringBodies(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "js/bodyfetcher")
	big := allBytes(1 << 20)
	sum := 0
	for _, c := range big {
		sum += int(c)
	}
	var sent []byte
	fetch := func(ctx context.Context, req FetchRequest) (*FetchResponse, *FetchError) {
		if req.Method == "POST" {
			sent = req.Body
			return &FetchResponse{Status: 200, Body: req.Body}, nil
		}
		return &FetchResponse{Status: 200, Body: big}, nil
	}
	// The deadline is not what is tested (27 s were seen on a loaded
	// machine, with the race detector).
	lim := Limits{Timeout: 2 * time.Minute, Memory: 256 << 20}
	for _, tt := range []struct{ name, input, want string }{
		{"binary response", `{"url":"https://x.test/"}`, fmt.Sprintf(`{"status":200,"len":%d,"bytes":[0,1,2,3,4,5,6,7],"sum":%d,"text":""}`, len(big), sum)},
		{"utf-8 request", `{"url":"https://x.test/","body":"café €"}`, `{"status":200,"len":9,"bytes":[99,97,102,195,169,32,226,130],"sum":1222,"text":"café €"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := sb.Execute(context.Background(), Call{Path: path, Limits: lim, Input: tt.input, Fetch: fetch})
			if err != nil || out.Failure != nil {
				t.Fatalf("got %+v, %v", out, err)
			}
			if out.Output != tt.want {
				t.Errorf("output %s, want %s", out.Output, tt.want)
			}
		})
	}
	if string(sent) != "café €" {
		t.Errorf("the host sent %q", sent)
	}
}
