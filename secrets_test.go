package maiden_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// The values of the secrets of these tests: none may appear in a tool's
// output or logs, in an error, or anywhere in the audit trail.
const (
	tokenValue   = "tok-VALUE-8f2d1c9a7e"
	signingValue = "sig-VALUE-4b7e0a2f91"
)

// secretsWorld is a real TLS server on loopback answering as
// api.example.com, which records the Authorization header of every request
// and echoes it back (so the gate's redaction of a response is exercised
// too), and agent.toml for the secretuser tool (maiden:tool@0.3.0), the
// JS fetcher (0.1.0) and the Go echo (0.2.0).
type secretsWorld struct {
	port, ca string
	audit    *testkit.SyncBuffer
	mu       sync.Mutex
	auth     []string // Authorization headers received, in order
	signings atomic.Int64
}

func newSecretsWorld(t *testing.T) *secretsWorld {
	w := &secretsWorld{audit: &testkit.SyncBuffer{}}
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.auth = append(w.auth, r.Header.Get("Authorization"))
		w.mu.Unlock()
		fmt.Fprintf(rw, "auth=%s", r.Header.Get("Authorization"))
	}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	w.port, w.ca = u.Port(), ca
	return w
}

func (w *secretsWorld) received() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.auth...)
}

func (w *secretsWorld) url() string { return "https://api.example.com:" + w.port + "/v1/x" }

// host is a Host over secretuser and the JS fetcher, with these agents:
// user (every card it needs, secret:reveal SIGNING_KEY), nocard (no
// secret:reveal card), narrow (every card, but its binding reveals
// nothing), marker (may call secretuser only with the TOKEN reference, as
// its grant spells the marker). SIGNING_KEY's value changes with every
// look-up (a rotation), so a revealed value is never the one the call's
// redactor looked up when the call started.
func (w *secretsWorld) host(t *testing.T, iso maiden.Isolation) *maiden.Host {
	net := fmt.Sprintf(`"network:connect api.example.com:%s"`, w.port)
	cfg := `version = 1
[tools.secretuser]
path = %[1]q
http_allow = ["api.example.com"]
http_ports = [` + w.port + `]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["` + w.ca + `"]
secrets = ["TOKEN", "SIGNING_KEY"]
reveal = ["SIGNING_KEY"]
[tools.fetcher]
path = %[2]q
http_allow = ["api.example.com"]
http_ports = [` + w.port + `]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["` + w.ca + `"]
secrets = ["TOKEN"]
[tools.echo]
path = %[3]q
secrets = ["TOKEN"]

[agents.user]
tools = ["secretuser", "fetcher", "echo"]
grants = ["tool:invoke secretuser --...", "tool:invoke fetcher --...", "tool:invoke echo --...", ` + net + `, "secret:use TOKEN", "secret:reveal SIGNING_KEY"]
[agents.nocard]
tools = ["secretuser"]
grants = ["tool:invoke secretuser --...", ` + net + `, "secret:use TOKEN"]
[agents.narrow.tools.secretuser]
reveal = []
[agents.narrow]
grants = ["tool:invoke secretuser --...", ` + net + `, "secret:reveal *"]
[agents.marker]
tools = ["secretuser"]
grants = ["tool:invoke secretuser --token=$secret:TOKEN --mode=fetch --url=*", ` + net + `, "secret:use TOKEN"]
[agents.tokenonly.tools.secretuser]
secrets = ["TOKEN"]
[agents.tokenonly]
grants = ["tool:invoke secretuser --..."]
`
	return newHostWith(t, cfg, maiden.Options{
		Isolation: iso,
		Resolver:  testkit.Loopback("api.example.com"),
		LookupSecret: func(name string) (string, bool) {
			switch name {
			case "TOKEN":
				return tokenValue, true
			case "SIGNING_KEY":
				return fmt.Sprintf("%s-%d", signingValue, w.signings.Add(1)), true
			}
			return "", false
		},
		Audit: slog.New(slog.NewJSONHandler(w.audit, nil)),
	}, "go/secretuser", "js/fetcher", "go/echo")
}

type secretOut struct {
	Received string `json:"received"`
	Status   int    `json:"status"`
	Body     string `json:"body"`
	Revealed string `json:"revealed"`
	Error    string `json:"error"`
}

func callSecretUser(t *testing.T, h *maiden.Host, agent, session string, in map[string]any) (maiden.Result, secretOut) {
	t.Helper()
	b, _ := json.Marshal(in)
	res, err := h.Call(context.Background(), maiden.Call{Agent: agent, Tool: "secretuser", Session: session, Input: string(b)})
	if err != nil {
		t.Fatal(err)
	}
	var out secretOut
	if res.OK {
		if err := json.Unmarshal([]byte(res.Output), &out); err != nil {
			t.Fatalf("output %q: %v", res.Output, err)
		}
	}
	return res, out
}

// everything is all a call left behind for the agent and the operator:
// output, error, logs, the whole audit trail and the egress audit log.
func everything(t *testing.T, h *maiden.Host, w *secretsWorld, results ...maiden.Result) string {
	t.Helper()
	var b strings.Builder
	for _, res := range results {
		rb, _ := json.Marshal(res)
		b.Write(rb)
		b.WriteByte('\n')
	}
	recs, err := h.AuditTail(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		rb, _ := json.Marshal(r)
		b.Write(rb)
		b.WriteByte('\n')
	}
	b.WriteString(w.audit.String())
	return b.String()
}

func auditOf(t *testing.T, h *maiden.Host, kind string) []map[string]any {
	t.Helper()
	recs, err := h.AuditTail(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, r := range recs {
		if r.Kind != kind {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatal(err)
		}
		m["agent"], m["tool"] = r.Agent, r.Tool
		out = append(out, m)
	}
	return out
}

// TestSecretHandleFlow: {"$secret": "TOKEN"} reaches the tool as an opaque
// handle, the tool passes it to http-fetch, and the server receives the
// secret; the tool's output and logs, the call's result and the whole audit
// trail hold the handle or the marker, never the value. In process and in
// worker processes.
func TestSecretHandleFlow(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			w := newSecretsWorld(t)
			h := w.host(t, iso.iso)
			res, out := callSecretUser(t, h, "user", "s1", map[string]any{"token": map[string]any{"$secret": "TOKEN"}, "mode": "fetch", "url": w.url()})
			if !res.OK || out.Status != 200 {
				t.Fatalf("got %+v (%+v)", res, res.Error)
			}
			if !strings.HasPrefix(out.Received, maiden.SecretHandlePrefix) || len(out.Received) != len(maiden.SecretHandlePrefix)+32 {
				t.Errorf("the tool received %q, want a handle", out.Received)
			}
			if got := w.received(); len(got) != 1 || got[0] != "Bearer "+tokenValue {
				t.Errorf("the server received %q, want the secret", got)
			}
			if out.Body != "auth=Bearer [REDACTED:TOKEN]" {
				t.Errorf("the server's echo reached the tool as %q", out.Body)
			}
			if len(res.Logs) == 0 || res.Logs[0].Message != "received "+out.Received {
				t.Errorf("logs %+v, want the handle logged", res.Logs)
			}
			all := everything(t, h, w, res)
			if strings.Contains(all, tokenValue) {
				t.Errorf("the secret's value leaked:\n%s", all)
			}
			admitted := auditOf(t, h, "call-admitted")
			if len(admitted) != 1 || !strings.Contains(admitted[0]["rendered"].(string), "--token=$secret:TOKEN") {
				t.Errorf("the call's audit record renders %v, want the marker $secret:TOKEN", admitted)
			}
			fetches := auditOf(t, h, "fetch")
			if len(fetches) != 1 || fetches[0]["credential"] != "TOKEN" || fetches[0]["allowed"] != true {
				t.Errorf("fetch audit %v, want the credential's name", fetches)
			}
			// The handle of that call means nothing in the next one, even
			// to the same tool of the same agent: a tool that kept it (here:
			// the agent, which saw it in the output) gets a refusal, and
			// nothing reaches the server.
			res2, out2 := callSecretUser(t, h, "user", "s1", map[string]any{"token": out.Received, "mode": "fetch", "url": w.url()})
			if !res2.OK || !strings.Contains(out2.Error, "not a secret handle of this call") {
				t.Errorf("an old handle as credential: %+v %+v", res2, out2)
			}
			if n := len(w.received()); n != 1 {
				t.Errorf("the server received %d requests, want 1", n)
			}
			if f := auditOf(t, h, "fetch"); len(f) != 2 || f[1]["allowed"] != false || f[1]["rule"] != maiden.RuleSecretHandle {
				t.Errorf("the refused handle is not audited: %v", f)
			}
			res3, out3 := callSecretUser(t, h, "user", "s1", map[string]any{"token": out.Received, "mode": "reveal"})
			if !res3.OK || !strings.Contains(out3.Error, "not a secret handle of this call") || out3.Revealed != "" {
				t.Errorf("an old handle revealed: %+v %+v", res3, out3)
			}
			if r := auditOf(t, h, maiden.AuditSecretReveal); len(r) != 1 || r[0]["outcome"] != "denied" || r[0]["agent"] != "user" || r[0]["session"] != "s1" {
				t.Errorf("the refused reveal of an old handle: audit %v", r)
			}
		})
	}
}

// TestSecretHandleGrants: a grant names the marker $secret:NAME, so a card
// can allow a call only with that secret reference; a literal string in
// its place is another call.
func TestSecretHandleGrants(t *testing.T) {
	t.Parallel()
	w := newSecretsWorld(t)
	h := w.host(t, maiden.InProcess)
	res, out := callSecretUser(t, h, "marker", "", map[string]any{"token": map[string]any{"$secret": "TOKEN"}, "mode": "fetch", "url": w.url()})
	if !res.OK || out.Status != 200 {
		t.Fatalf("the marker's grant: %+v %+v", res, res.Error)
	}
	res, _ = callSecretUser(t, h, "marker", "", map[string]any{"token": "some-text", "mode": "fetch", "url": w.url()})
	if res.OK || res.Error == nil || res.Error.Kind != maiden.KindDenied {
		t.Errorf("a literal token under the marker's grant: %+v", res)
	}
}

// TestSecretHandleRefused: a reference where the tool's schema wants a
// number, to a secret the tool (or the agent's binding) may not use, or
// malformed, is refused before anything runs, naming the place.
func TestSecretHandleRefused(t *testing.T) {
	t.Parallel()
	w := newSecretsWorld(t)
	h := w.host(t, maiden.InProcess)
	for _, tt := range []struct {
		name, agent string
		in          map[string]any
		want        string
	}{
		{"schema wants a number", "user", map[string]any{"token": "x", "count": map[string]any{"$secret": "TOKEN"}},
			`{"$secret": "TOKEN"} at /count: the tool's schema does not admit a string there`},
		{"unknown secret", "user", map[string]any{"token": map[string]any{"$secret": "NOPE"}},
			`input at /token: {"$secret": "NOPE"}: not a secret this tool may use`},
		{"not in the binding's secrets", "tokenonly", map[string]any{"token": map[string]any{"$secret": "SIGNING_KEY"}},
			`input at /token: {"$secret": "SIGNING_KEY"}: not a secret this tool may use`},
		{"not a name", "user", map[string]any{"token": map[string]any{"$secret": 5}},
			`input at /token: "$secret" must name a secret (a string), got a number`},
		{"extra keys", "user", map[string]any{"token": map[string]any{"$secret": "TOKEN", "x": 1}},
			`input at /token: a secret reference is {"$secret": "NAME"} alone, but this object also has x`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := callSecretUser(t, h, tt.agent, "", tt.in)
			if res.OK || res.Error == nil || res.Error.Kind != maiden.KindInput || !strings.Contains(res.Error.Message, tt.want) {
				t.Errorf("got %+v %+v\nwant kind input with %q", res, res.Error, tt.want)
			}
		})
	}
	if n := len(auditOf(t, h, "call-admitted")); n != 0 {
		t.Errorf("%d refused calls were admitted", n)
	}
}

// TestReveal: reveal returns the value only with the binding's reveal, a
// secret:reveal card and a handle of the call; every reveal is audited
// (agent, session, tool, secret, outcome; never the value), and the value
// the tool echoes into its output, log and stdout comes back redacted,
// although it is not the value the call's redactor looked up at its start
// (SIGNING_KEY rotates on every look-up).
func TestReveal(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			w := newSecretsWorld(t)
			h := w.host(t, iso.iso)
			ref := func(name string) map[string]any {
				return map[string]any{"token": map[string]any{"$secret": name}, "mode": "reveal"}
			}
			var results []maiden.Result

			res, out := callSecretUser(t, h, "nocard", "s-nocard", ref("SIGNING_KEY"))
			results = append(results, res)
			if !res.OK || out.Revealed != "" || !strings.Contains(out.Error, `no card of agent "nocard" allows secret:reveal SIGNING_KEY`) {
				t.Errorf("no card: %+v %+v", res, out)
			}
			res, out = callSecretUser(t, h, "narrow", "", ref("SIGNING_KEY"))
			results = append(results, res)
			if !res.OK || out.Revealed != "" || !strings.Contains(out.Error, "revealing SIGNING_KEY is not allowed for tool secretuser: it is not in reveal") {
				t.Errorf("binding without reveal: %+v %+v", res, out)
			}
			res, out = callSecretUser(t, h, "user", "", ref("TOKEN"))
			results = append(results, res)
			if !res.OK || out.Revealed != "" || !strings.Contains(out.Error, "revealing TOKEN is not allowed") {
				t.Errorf("a secret outside the tool's reveal: %+v %+v", res, out)
			}

			res, out = callSecretUser(t, h, "user", "s-user", ref("SIGNING_KEY"))
			results = append(results, res)
			if !res.OK || out.Error != "" || out.Revealed != "[REDACTED:SIGNING_KEY]" {
				t.Fatalf("allowed reveal: %+v %+v", res, out)
			}
			var logged []string
			for _, e := range res.Logs {
				logged = append(logged, e.Message)
			}
			if l := strings.Join(logged, "\n"); !strings.Contains(l, "revealed [REDACTED:SIGNING_KEY]") || !strings.Contains(l, "stdout [REDACTED:SIGNING_KEY]") {
				t.Errorf("logs %q, want the echoes redacted", logged)
			}
			if all := everything(t, h, w, results...); strings.Contains(all, signingValue) || strings.Contains(all, tokenValue) {
				t.Errorf("a secret's value leaked:\n%s", all)
			}
			if w.signings.Load() < 2 {
				t.Errorf("SIGNING_KEY was looked up %d times; the test needs the call's start and the reveal", w.signings.Load())
			}

			recs := auditOf(t, h, maiden.AuditSecretReveal)
			want := []struct{ agent, session, secret, outcome, rule string }{
				{"nocard", "s-nocard", "SIGNING_KEY", "denied", "no card"},
				{"narrow", "default-narrow", "SIGNING_KEY", "denied", "tools.secretuser.reveal"}, // no Call.Session: the agent's default session, by its ID
				{"user", "default-user", "TOKEN", "denied", "tools.secretuser.reveal"},
				{"user", "s-user", "SIGNING_KEY", "allowed", "card "},
			}
			if len(recs) != len(want) {
				t.Fatalf("reveal audit records %v, want %d", recs, len(want))
			}
			for i, wnt := range want {
				r := recs[i]
				session, _ := r["session"].(string)
				if r["agent"] != wnt.agent || r["tool"] != "secretuser" || session != wnt.session || r["secret"] != wnt.secret || r["outcome"] != wnt.outcome {
					t.Errorf("reveal record %d: %v, want %+v", i, r, wnt)
				}
				// The decision as decide returned it: who decided, and
				// the target asked.
				d, _ := r["decision"].(map[string]any)
				rule, _ := d["rule"].(string)
				if d["allow"] != (wnt.outcome == "allowed") || !strings.HasPrefix(rule, wnt.rule) || d["target"] != "secret:reveal "+wnt.secret {
					t.Errorf("reveal record %d: decision %v, want allow %v by %q… of secret:reveal %s", i, d, wnt.outcome == "allowed", wnt.rule, wnt.secret)
				}
			}
		})
	}
}

// TestSecretHandleInOlderTools: tools built against maiden:tool@0.1.0 (the
// JS fetcher) and 0.2.0 (the Go echo), which cannot import reveal, are
// unaffected by 0.3.0: they load and run as before, and take a handle where
// they take a string: the fetcher passes it as its credential like a name.
func TestSecretHandleInOlderTools(t *testing.T) {
	t.Parallel()
	w := newSecretsWorld(t)
	h := w.host(t, maiden.InProcess)
	in := fmt.Sprintf(`{"url": %q, "credential": {"$secret": "TOKEN"}}`, w.url())
	res, err := h.Call(context.Background(), maiden.Call{Agent: "user", Tool: "fetcher", Input: in})
	if err != nil || !res.OK || !strings.Contains(res.Output, "auth=Bearer [REDACTED:TOKEN]") {
		t.Fatalf("got %+v, %v", res, err)
	}
	if got := w.received(); len(got) != 1 || got[0] != "Bearer "+tokenValue {
		t.Errorf("the server received %q", got)
	}
	in = fmt.Sprintf(`{"url": %q, "credential": "TOKEN"}`, w.url())
	if res, err := h.Call(context.Background(), maiden.Call{Agent: "user", Tool: "fetcher", Input: in}); err != nil || !res.OK {
		t.Errorf("a name as credential, as before: %+v, %v", res, err)
	}
	res, err = h.Call(context.Background(), maiden.Call{Agent: "user", Tool: "echo", Input: `{"message": "plain"}`})
	if err != nil || !res.OK || res.Output != `{"message":"plain"}` {
		t.Errorf("0.2.0 echo: %+v, %v", res, err)
	}
	res, err = h.Call(context.Background(), maiden.Call{Agent: "user", Tool: "echo", Input: `{"message": {"$secret": "TOKEN"}}`})
	if err != nil || !res.OK || !strings.HasPrefix(res.Output, `{"message":"`+maiden.SecretHandlePrefix) {
		t.Errorf("0.2.0 echo of a reference: %+v, %v", res, err)
	}
}

// TestSecretHandleEscapedKey: "$secret" spelt with JSON escapes is the same
// key (the quick check that skips inputs without references must not
// skip it), and a marker typed as text without a reference stays text.
func TestSecretHandleEscapedKey(t *testing.T) {
	t.Parallel()
	w := newSecretsWorld(t)
	h := w.host(t, maiden.InProcess)
	for _, in := range []string{`{"token": {"\u0024secret": "TOKEN"}}`, `{"token": {"\u0024\u0073ecret": "\u0054OKEN"}}`} {
		res, err := h.Call(context.Background(), maiden.Call{Agent: "user", Tool: "secretuser", Input: in})
		if err != nil || !res.OK || !strings.Contains(res.Output, `"received":"`+maiden.SecretHandlePrefix) {
			t.Errorf("%s: got %+v, %v; want a handle", in, res, err)
		}
	}
	res, err := h.Call(context.Background(), maiden.Call{Agent: "user", Tool: "secretuser", Input: `{"token": "$secret:TOKEN"}`})
	if err != nil || !res.OK || !strings.Contains(res.Output, `"received":"$secret:TOKEN"`) {
		t.Errorf("a marker as text: got %+v, %v; want the text itself", res, err)
	}
}

// TestRevealImplicitAgent: a configuration without [agents] runs as the
// implicit agent, which holds every card: agent.toml's reveal alone
// decides.
func TestRevealImplicitAgent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		reveal string
		want   string
	}{
		{`reveal = ["SIGNING_KEY"]`, `"revealed":"[REDACTED:SIGNING_KEY]"`},
		{``, `revealing SIGNING_KEY is not allowed for tool secretuser`},
	} {
		h := newHostWith(t, `version = 1
[tools.secretuser]
path = %q
secrets = ["SIGNING_KEY"]
`+tt.reveal+`
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(string) (string, bool) { return signingValue, true }}, "go/secretuser")
		res, err := h.Call(context.Background(), maiden.Call{Tool: "secretuser", Input: `{"token": {"$secret": "SIGNING_KEY"}, "mode": "reveal"}`})
		if err != nil || !res.OK || !strings.Contains(res.Output, tt.want) || strings.Contains(res.Output, signingValue) {
			t.Errorf("%q: got %+v, %v; want %s", tt.reveal, res, err, tt.want)
		}
	}
}

// TestRevealedValueNotInFetchRecords: a tool that may reveal a key and then
// puts it where the request is recorded (in the URL's path, as APIs that
// take a key in the path want, or as the name of its credential) leaves no
// trace of the value in the fetch audit records or the egress audit log:
// every record of the call is kept from the value like its output is, and
// so is the call's failure that quotes the gate's refusal.
func TestRevealedValueNotInFetchRecords(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			w := newSecretsWorld(t)
			h := w.host(t, iso.iso)
			res, _ := callSecretUser(t, h, "user", "s-user", map[string]any{"token": map[string]any{"$secret": "SIGNING_KEY"}, "mode": "revealfetch", "url": w.url()})
			// The tool gives up after its second request is refused: the
			// failure names the refusal, which quotes the credential.
			if res.OK || res.Error == nil || res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, "[REDACTED:SIGNING_KEY]") {
				t.Errorf("reveal, fetch, give up: %+v, want denied naming the refusal with the value redacted", res.Error)
			}
			if all := everything(t, h, w, res); strings.Contains(all, signingValue) {
				for _, l := range strings.Split(all, "\n") {
					if strings.Contains(l, signingValue) {
						t.Errorf("the revealed value is recorded: %s", l)
					}
				}
			}
		})
	}
}
