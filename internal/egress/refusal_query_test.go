package egress

import (
	"context"
	"strings"
	"testing"
)

// TestRefusalQuotesNoQuery (hostile): a URL the gate refuses before
// anything is sent is quoted in the refusal, which is the audit event's
// reason and the error web_fetch hands on to the call's record. The audit
// event never holds the query string (doc.go), nor may it hold the password
// of a URL's user info: a caller's own keys travel there. Each URL is
// refused by its own rule, before any lookup.
func TestRefusalQuotesNoQuery(t *testing.T) {
	e := newEnv(t)
	p := mustPolicy(t, toolFor(t))
	const q, pw = "Q-k3y-in-query", "PW-in-userinfo"
	cases := []struct {
		url, rule string
	}{
		{"https://user:" + pw + "@api.example.com/v1?key=" + q, RuleUserinfo},
		{"https://api.example.com:" + pw + "@evil.example/?key=" + q, RuleUserinfo},
		{"https:api.example.com/v1?key=" + q, RuleURL},
		{"https://api.example.com/v1?key=" + q + "\x7f", RuleURL},
		{"//api.example.com/v1?key=" + q, RuleURL},
		{"https:///v1?key=" + q, RuleURL},
		{"https://user:" + pw + "@api.example.com/v1#key=" + q, RuleUserinfo},
	}
	for _, c := range cases {
		_, ferr := e.gate.Fetch(context.Background(), p, get(c.url))
		if ferr == nil || ferr.Kind != FetchDenied || ferr.Rule != c.rule {
			t.Fatalf("%q: got %v, want a denial by %s", c.url, ferr, c.rule)
		}
		if strings.Contains(ferr.Message, q) || strings.Contains(ferr.Message, pw) {
			t.Errorf("%q: the refusal quotes the query or the password: %s", c.url, ferr.Message)
		}
	}
	if raw := e.audit.raw(); strings.Contains(raw, q) || strings.Contains(raw, pw) {
		t.Errorf("the audit log holds the query or the password:\n%s", raw)
	}
	if n := e.res.total.Load(); n != 0 {
		t.Errorf("%d lookups for refused URLs", n)
	}
}

func TestShownURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example.com/v1?k=v#f":        "https://api.example.com/v1",
		"https://u:p@api.example.com/a@b?k=v":     "https://u:xxxxx@api.example.com/a@b",
		"https://u@api.example.com/":              "https://u@api.example.com/",
		"https://a.example:443@evil.example":      "https://a.example:xxxxx@evil.example",
		"https:api.example.com/x?k=v":             "https:api.example.com/x",
		"https://api.example.com/p:q@r":           "https://api.example.com/p:q@r",
		"https://u:p:q@api.example.com#x?k=v@w:z": "https://u:xxxxx@api.example.com",
	} {
		if got := shownURL(in); got != want {
			t.Errorf("shownURL(%q) = %q, want %q", in, got, want)
		}
	}
}
