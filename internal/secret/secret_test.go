package secret

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/sandbox"
)

func parse(t *testing.T, text string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestIssueAndHandles: a reference becomes its marker for what decides and
// the call's handle for the tool; a secret the tool may not use, or a
// malformed reference, is refused naming its place; a handle resolves only
// in the call that issued it.
func TestIssueAndHandles(t *testing.T) {
	hs, doc, err := Issue(parse(t, `{"a":{"$secret":"GH"},"b":["x",{"$secret":"GH"}]}`), []string{"GH"})
	if err != nil || hs == nil {
		t.Fatalf("Issue: %v %v", hs, err)
	}
	marked, _ := Marshal(doc)
	if marked != `{"a":"$secret:GH","b":["x","$secret:GH"]}` {
		t.Errorf("marked input %s", marked)
	}
	run, _ := Marshal(hs.WithHandles(doc))
	var v struct {
		A string
		B []string
	}
	if err := json.Unmarshal([]byte(run), &v); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.A, HandlePrefix) || v.B[1] != v.A {
		t.Errorf("the tool's input %s: want one handle for GH in both places", run)
	}
	if name, ok := hs.Lookup(v.A); !ok || name != "GH" {
		t.Errorf("Lookup(own handle) = %q %v", name, ok)
	}
	other, _, _ := Issue(parse(t, `{"$secret":"GH"}`), []string{"GH"})
	if _, ok := other.Lookup(v.A); ok {
		t.Error("another call's handles resolve this call's handle")
	}
	for input, want := range map[string]string{
		`{"a":{"$secret":"OTHER"}}`:       `input at /a: {"$secret": "OTHER"}: not a secret this tool may use`,
		`{"a":{"$secret":1}}`:             `"$secret" must name a secret (a string), got a number`,
		`{"a":{"$secret":"GH","more":1}}`: `also has more`,
	} {
		if _, _, err := Issue(parse(t, input), []string{"GH"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Issue(%s) = %v, want %q", input, err, want)
		}
	}
	if hs, _, err := Issue(parse(t, `{"a":"$secret:GH"}`), []string{"GH"}); hs != nil || err != nil {
		t.Errorf("no reference: %v %v, want nil, nil", hs, err)
	}
}

// TestFetchRefusesForeignHandle: a credential that looks like a handle but
// is not one of this call's never reaches the gate and is reported for
// the audit trail; one of the call's reaches it as the secret's name.
func TestFetchRefusesForeignHandle(t *testing.T) {
	hs, doc, _ := Issue(parse(t, `{"$secret":"GH"}`), []string{"GH"})
	own := hs.WithHandles(doc).(string)
	var reached []string
	var audited []map[string]any
	f := Fetch(hs, func(_ context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		reached = append(reached, req.Credential)
		return &sandbox.FetchResponse{}, nil
	}, func(body map[string]any) { audited = append(audited, body) })
	ctx := context.Background()
	if _, ferr := f(ctx, sandbox.FetchRequest{URL: "https://h/p", HasCredential: true, Credential: HandlePrefix + "00"}); ferr == nil || ferr.Kind != sandbox.FetchDenied {
		t.Errorf("a foreign handle: %v, want denied", ferr)
	}
	if len(audited) != 1 || audited[0]["rule"] != RuleHandle || audited[0]["host"] != "h" {
		t.Errorf("audited %v", audited)
	}
	if _, ferr := f(ctx, sandbox.FetchRequest{URL: "https://h/p", HasCredential: true, Credential: own}); ferr != nil {
		t.Errorf("the call's own handle: %v", ferr)
	}
	if len(reached) != 1 || reached[0] != "GH" {
		t.Errorf("the gate saw credentials %v, want only GH", reached)
	}
}
