package callaudit

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
)

// verdict is a middleware layer's verdict as the root records it.
type verdict struct {
	Rule    string `json:"rule"`
	Use     string `json:"use"`
	Verdict string `json:"verdict"`
	Detail  string `json:"detail,omitempty"`
}

type callRecord = Record[verdict]

// TestCallRecordJSON: the hand-written encoding of a call's record decodes
// to the same record as encoding/json's, for hostile strings too (quotes,
// backslashes, control characters, invalid UTF-8, U+2028).
func TestCallRecordJSON(t *testing.T) {
	rev0, rev3 := int64(0), int64(3) // revision 0 is recorded too
	for _, s := range []string{"", "plain", `--city="Paris" --x=\n`, "tab\there\nnl\r\x00\x1f\x7f", "bad \xff\xfe utf8", "sep \u2028\u2029 end", "emoji 🙂 and ü"} {
		recs := []callRecord{
			{Rendered: s},
			{Rendered: s, Component: s, Signer: s},
			{Rendered: s, Component: s, ComponentLocal: true, Schema: s},
			{Rendered: s, Component: s, Signer: s, Schema: s},
			{Session: s, Rendered: s, Card: s, Approval: s, Kind: api.KindDenied, Message: s, Error: s, DurationMS: 42},
			{Rendered: s, Middleware: []verdict{{Rule: "middleware[1]", Use: "validate", Verdict: "pass", Detail: s}}},
			{Rendered: s, Card: s, Decision: &api.Decision{Allow: true, Card: s, Bound: s, Grant: s, Component: s}},
			{Rendered: s, Decision: &api.Decision{Reason: s, Target: s, Fix: s, Wallet: s, Component: s}},
			{Rendered: s, Decision: &api.Decision{Reason: s, Rule: s, Card: s, Bound: s, Grant: s, Target: s, Fix: s}, Kind: api.KindDenied, Message: s},
			{Rendered: s, Decision: &api.Decision{}},
			{Rendered: s, DurationMS: 7, ToolKind: s, OutputBytes: 1 << 40, TraceID: s},
			{Session: s, Rendered: s, Kind: api.KindTool, BoundaryRevision: &rev0, TraceID: s},
			{Session: s, Rendered: s, BoundaryRevision: &rev3},
			{Rendered: s, Decision: &api.Decision{Allow: true, Card: s}, BeforeRewrite: []Rewritten{{Rendered: s, Decision: &api.Decision{Allow: true, Card: s, Wallet: s}}}, RewritesTruncated: true},
			{Rendered: s, FS: []api.Decision{{Allow: true, Target: s, Card: s}, {Reason: s, Target: s}}, FSTruncated: true, Middleware: []verdict{{Rule: s}}},
			{Rendered: s, Decision: &api.Decision{Allow: true, Card: s}, SecretUse: &api.Decision{Allow: true, Target: s, Card: s, Bound: s, Grant: s, Wallet: s}},
			{Rendered: s, Decision: &api.Decision{Allow: true, Card: s}, SecretUse: &api.Decision{Reason: s, Rule: s, Target: s, Fix: s}, Kind: api.KindDenied, Message: s, Middleware: []verdict{{Rule: s}}},
		}
		for _, rec := range recs {
			b, err := rec.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(b) {
				t.Fatalf("invalid JSON for %q: %s", s, b)
			}
			var got, want callRecord
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			ref, _ := json.Marshal(rec)
			if err := json.Unmarshal(ref, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%q:\n got %+v\nwant %+v", s, got, want)
			}
			if utf8.ValidString(s) && got.Rendered != s {
				t.Errorf("%q came back as %q", s, got.Rendered)
			}
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", `"\`, "\x00\xff", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q → %s: %v", s, b, err)
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if utf8.ValidString(s) && got != s || !utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("%q → %q (want %q)", s, got, want)
		}
	})
}

// TestKeepRewrite: the decisions before rewrites are kept in order from
// the agent's own, which always fits, up to MaxRewrites entries and
// MaxRewriteBytes of the later renderings; the first one left out cuts
// the list.
func TestKeepRewrite(t *testing.T) {
	big := strings.Repeat("x", MaxRewriteBytes)
	var list []Rewritten
	list, cut := KeepRewrite(list, Rewritten{Rendered: big + big})
	if len(list) != 1 || cut {
		t.Fatalf("the agent's own input, however long: kept %d, cut %v", len(list), cut)
	}
	list, cut = KeepRewrite(list, Rewritten{Rendered: big[:MaxRewriteBytes-10]})
	if len(list) != 2 || cut {
		t.Fatalf("within the bytes: kept %d, cut %v", len(list), cut)
	}
	if list, cut = KeepRewrite(list, Rewritten{Rendered: "01234567890"}); len(list) != 2 || !cut {
		t.Fatalf("over the bytes: kept %d, cut %v", len(list), cut)
	}
	list = nil
	for i := range MaxRewrites + 1 {
		list, cut = KeepRewrite(list, Rewritten{Rendered: "r"})
		if cut != (i == MaxRewrites) {
			t.Fatalf("entry %d: cut %v", i, cut)
		}
	}
	if len(list) != MaxRewrites {
		t.Fatalf("kept %d, want %d", len(list), MaxRewrites)
	}
}

// BenchmarkAppendJSON is the encoding of a local tool's call-admitted
// record as the call path writes it: the rendering, the card, the
// component and schema digests and the decision naming the component.
func BenchmarkAppendJSON(b *testing.B) {
	digest := "sha256:" + strings.Repeat("3f21a2e2ee1aa468", 4)
	rec := callRecord{Rendered: "--message=hi", Card: "card_2cb2c1d0e5f3a4b6", Component: digest, ComponentLocal: true, Schema: digest,
		Decision: &api.Decision{Allow: true, Card: "card_2cb2c1d0e5f3a4b6", Grant: "tool:invoke echo --message=*", Wallet: "w_0123456789abcdef", Component: digest},
		TraceID:  "4bf92f3577b34da6a3ce929d0e0e4736"}
	var buf [512]byte
	for b.Loop() {
		if _, err := rec.AppendJSON(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
