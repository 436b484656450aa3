package secret

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
)

// TestRevealer: a tool learns a secret's value only through a handle of
// its own call, only when the cards and the binding allow it, only once its
// record is written, and from then on the value is redacted from whatever
// the call's redactor cleans. Every refusal is recorded with its reason.
func TestRevealer(t *testing.T) {
	values := map[string]string{"GH": "gh-value-5f3a9c1e", "OTHER": "other-value-77d2", "BINARY": "bin-\xff\xfe-value", "EMPTY": ""}
	hs, doc, err := Issue(parse(t, `{"a":{"$secret":"GH"},"b":{"$secret":"OTHER"},"c":{"$secret":"EMPTY"},"d":{"$secret":"BINARY"}}`), []string{"GH", "OTHER", "EMPTY", "BINARY"})
	if err != nil {
		t.Fatal(err)
	}
	handles := hs.WithHandles(doc).(map[string]any)
	g, err := grant.Parse("secret:reveal GH")
	must(t, err)
	e, err := grant.Parse("secret:reveal EMPTY")
	must(t, err)
	b, err := grant.Parse("secret:reveal BINARY")
	must(t, err)
	basis := decide.Basis{
		Wallet:  cards.NewWallet("a", time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), []cards.Card{{ID: "r", Spec: cards.Spec{LowerPos: cards.Any(g, e, b)}}}),
		Binding: decide.Binding{Tool: "vault", Secrets: []string{"GH", "OTHER", "EMPTY", "BINARY"}, Reveal: []string{"GH", "OTHER", "EMPTY", "BINARY"}},
	}
	var records []RevealRecord
	failRecord := false
	r := Revealer{
		Handles: hs, Basis: basis, Session: "s1",
		Lookup: func(name string) (string, bool) { v, ok := values[name]; return v, ok },
		Record: func(rec *RevealRecord) error {
			records = append(records, *rec)
			if failRecord {
				return errors.New("journal full")
			}
			return nil
		},
	}
	reveal := r.Func()
	ctx := context.Background()
	for _, c := range []struct {
		name, handle, want string // want: the refusal's words; "" for allowed
	}{
		{"a secret's name is not its handle", "GH", "not a secret handle of this call"},
		{"another call's handle", HandlePrefix + "00", "not a secret handle of this call"},
		{"no card allows it", handles["b"].(string), `no card of agent "a" allows secret:reveal OTHER`},
		{"no value on the host", handles["c"].(string), "secret EMPTY has no value on the host"},
		{"a value that is not text", handles["d"].(string), "the value of secret BINARY is not UTF-8 text"},
		{"allowed", handles["a"].(string), ""},
	} {
		records = nil
		v, err := reveal(ctx, c.handle)
		if len(records) != 1 {
			t.Fatalf("%s: %d records, want 1", c.name, len(records))
		}
		rec := records[0]
		if c.want == "" {
			if err != nil || v != values["GH"] || rec.Outcome != "allowed" || rec.Secret != "GH" || rec.Decision == nil || !rec.Decision.Allow {
				t.Errorf("%s: %q, %v, recorded %+v; want GH's value, recorded allowed with its decision", c.name, v, err, rec)
			}
			continue
		}
		if err == nil || v != "" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: reveal = %q, %v; want refused: %s", c.name, v, err, c.want)
		}
		if rec.Outcome != "denied" || !strings.Contains(rec.Reason, c.want) {
			t.Errorf("%s: recorded %+v, want denied: %s", c.name, rec, c.want)
		}
	}

	// The revealed value is redacted from then on, after the base redactor.
	base := func(s string) string { return strings.ReplaceAll(s, "base-secret", "[base]") }
	if got := hs.Redactor(base)("echo base-secret " + values["GH"]); strings.Contains(got, "base-secret") || strings.Contains(got, values["GH"]) {
		t.Errorf("the call's redactor left %q", got)
	}
	if got := hs.Redactor(nil)(values["OTHER"]); got != values["OTHER"] {
		t.Errorf("a value never revealed was redacted: %q", got)
	}

	// A reveal whose record cannot be written is refused, and its value is
	// not revealed.
	hs2, doc2, err := Issue(parse(t, `{"$secret":"GH"}`), []string{"GH"})
	must(t, err)
	r.Handles, failRecord, records = hs2, true, nil
	if v, err := r.Func()(ctx, hs2.WithHandles(doc2).(string)); err == nil || v != "" || !strings.Contains(err.Error(), "could not be written") {
		t.Errorf("reveal with its record refused = %q, %v; want refused because the audit record could not be written", v, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
