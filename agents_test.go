package maiden_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestImplicitAgent: a configuration without [agents] runs every call as
// the default agent, as before agents existed (CARDS.md A12 needs a
// declared agent; this is the compatibility half).
func TestImplicitAgent(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, "version = 1\n[tools.echo]\npath = %q\n", maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	for _, agent := range []string{"", maiden.DefaultAgent} {
		res, err := h.Call(ctx, maiden.Call{Agent: agent, Tool: "echo", Input: `{"message":"hi"}`})
		if err != nil || !res.OK {
			t.Errorf("agent %q: %+v, %v", agent, res, err)
		}
	}
	_, err := h.Call(ctx, maiden.Call{Agent: "research", Tool: "echo", Input: `{}`})
	if !errors.Is(err, maiden.ErrUnknownAgent) || !strings.Contains(err.Error(), "declares no [agents]") {
		t.Errorf("undeclared agent: %v", err)
	}
	infos, err := h.ToolsFor(ctx, "")
	if err != nil || len(infos) != 1 {
		t.Errorf("ToolsFor: %v, %v", infos, err)
	}
}

// TestBindingsExposeAndNarrow: an agent sees only the tools bound to it (an
// unbound tool is "unknown", in the same words as one that does not exist:
// CARDS.md A12's second half, even with a card that would allow it), and
// a binding narrows the tool's policy for
// that agent only: hosts, secrets and timeout.
func TestBindingsExposeAndNarrow(t *testing.T) {
	t.Parallel()
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s auth=%v", r.Host, r.Header.Get("Authorization") != "")
	}), "api.example.com", "other.example.com")
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %[1]q
[tools.fetcher]
path = %[2]q
http_allow = ["api.example.com", "other.example.com"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
secrets = ["TOKEN"]
[tools.loop]
path = %[3]q
timeout_ms = 5000

[agents.research]
tools = ["echo"]
grants = ["tool:invoke echo --...", "tool:invoke fetcher --..."]

[agents.wide]
tools = ["fetcher", "loop"]
grants = ["tool:invoke fetcher --...", "tool:invoke loop --...", "network:connect *", "secret:use TOKEN"]

[agents.narrow]
grants = ["tool:invoke fetcher --...", "tool:invoke loop --...", "network:connect *", "secret:use TOKEN"]
[agents.narrow.tools.fetcher]
http_allow = ["api.example.com"]
secrets = []
[agents.narrow.tools.loop]
timeout_ms = 100
`, maiden.Options{
		Isolation:    maiden.InProcess,
		Resolver:     testkit.Loopback("api.example.com", "other.example.com"),
		LookupSecret: func(string) (string, bool) { return "tok-value", true },
	}, "echo", "js/fetcher", "loop")
	ctx := context.Background()

	// Exposure.
	if res, err := h.Call(ctx, maiden.Call{Agent: "research", Tool: "echo", Input: `{"message":"hi"}`}); err != nil || !res.OK {
		t.Fatalf("bound tool: %+v, %v", res, err)
	}
	_, unbound := h.Call(ctx, maiden.Call{Agent: "research", Tool: "fetcher", Input: `{}`})
	_, missing := h.Call(ctx, maiden.Call{Agent: "research", Tool: "nosuch", Input: `{}`})
	if !errors.Is(unbound, maiden.ErrUnknownTool) || !errors.Is(missing, maiden.ErrUnknownTool) {
		t.Fatalf("unbound: %v; missing: %v", unbound, missing)
	}
	if strings.ReplaceAll(unbound.Error(), "fetcher", "X") != strings.ReplaceAll(missing.Error(), "nosuch", "X") {
		t.Errorf("an unbound tool is told apart from a missing one:\n%v\n%v", unbound, missing)
	}
	for _, agent := range []string{"", "nobody"} {
		if _, err := h.Call(ctx, maiden.Call{Agent: agent, Tool: "echo", Input: `{}`}); !errors.Is(err, maiden.ErrUnknownAgent) {
			t.Errorf("agent %q: %v", agent, err)
		}
	}

	// Narrowing, for one agent only.
	base := "https://%s:" + port + "/"
	fetch := func(agent, host, cred string) maiden.Result {
		t.Helper()
		in := fmt.Sprintf(`{"url":%q,"credential":%q}`, fmt.Sprintf(base, host), cred)
		if cred == "" {
			in = fmt.Sprintf(`{"url":%q}`, fmt.Sprintf(base, host))
		}
		res, err := h.Call(ctx, maiden.Call{Agent: agent, Tool: "fetcher", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := fetch("wide", "other.example.com", "TOKEN"); !res.OK || !strings.Contains(res.Output, "host=other.example.com") || !strings.Contains(res.Output, "auth=true") {
		t.Errorf("wide agent, other host: %+v", res)
	}
	if res := fetch("narrow", "api.example.com", ""); !res.OK {
		t.Errorf("narrow agent, its host: %+v", res)
	}
	if res := fetch("narrow", "other.example.com", ""); res.OK || res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, "http_allow") {
		t.Errorf("narrow agent, host its binding dropped: %+v", res)
	}
	if res := fetch("narrow", "api.example.com", "TOKEN"); res.OK || res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, "credential-undeclared") {
		t.Errorf("narrow agent, secret its binding dropped: %+v", res)
	}
	// The wide agent's policy is unchanged after the narrow one ran.
	if res := fetch("wide", "other.example.com", ""); !res.OK {
		t.Errorf("wide agent after narrow: %+v", res)
	}
	res, err := h.Call(ctx, maiden.Call{Agent: "narrow", Tool: "loop", Input: `{}`})
	if err != nil || res.OK || res.Error.Kind != maiden.KindDeadline || !strings.Contains(res.Error.Message, "100ms") {
		t.Errorf("narrowed timeout: %+v, %v", res, err)
	}

	// Listing.
	infos, err := h.ToolsFor(ctx, "narrow")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, info := range infos {
		names = append(names, info.Name)
		if info.Name == "fetcher" && (len(info.Policy.HTTPAllow) != 1 || len(info.Policy.Secrets) != 0) {
			t.Errorf("narrow's fetcher policy: %+v", info.Policy)
		}
		if info.Name == "loop" && info.Policy.TimeoutMS != 100 {
			t.Errorf("narrow's loop policy: %+v", info.Policy)
		}
	}
	if strings.Join(names, ",") != "fetcher,loop" {
		t.Errorf("narrow sees %v", names)
	}
	if infos, err := h.ToolsFor(ctx, "research"); err != nil || len(infos) != 1 || infos[0].Name != "echo" {
		t.Errorf("research sees %+v, %v", infos, err)
	}
	if _, err := h.ToolsFor(ctx, "nobody"); !errors.Is(err, maiden.ErrUnknownAgent) {
		t.Errorf("ToolsFor(nobody): %v", err)
	}
}

// TestCardsAuthorize: a declared agent can call nothing until a card allows
// it, argument by argument (CARDS.md A10, A11, A12), and a denial names
// the grant that would allow it in the form an operator can paste.
func TestCardsAuthorize(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q

[agents.exact]
tools = ["echo"]
grants = ["tool:invoke echo --message=cart"]

[agents.literal]
tools = ["echo"]
grants = ['tool:invoke echo --message=\*']

[agents.glob]
tools = ["echo"]
grants = ["tool:invoke echo --message=ca*"]

[agents.strict]
tools = ["echo"]
grants = ["tool:invoke echo --message=*"]

[agents.open]
tools = ["echo"]
grants = ["tool:invoke echo --message=* --..."]

[agents.nocard]
tools = ["echo"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	for _, tt := range []struct {
		scenario, agent, input string
		allowed                bool
	}{
		{"A10", "exact", `{"message":"cart"}`, true},
		{"A10", "exact", `{"message":"x"}`, false},
		{"A11 escaped", "literal", `{"message":"cart"}`, false},
		{"A11 escaped", "literal", `{"message":"*"}`, true},
		{"A11 glob", "glob", `{"message":"cart"}`, true},
		{"A11 glob", "glob", `{"message":"dart"}`, false},
		{"unmentioned argument", "strict", `{"message":"a","shout":true}`, false},
		{"--... allows further arguments", "open", `{"message":"a","shout":true}`, true},
		{"A12 bound, no card", "nocard", `{"message":"a"}`, false},
	} {
		t.Run(tt.scenario+"/"+tt.agent+"/"+tt.input, func(t *testing.T) {
			res, err := h.Call(context.Background(), maiden.Call{Agent: tt.agent, Tool: "echo", Input: tt.input})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != tt.allowed {
				t.Fatalf("allowed %v, want %v: %+v", res.OK, tt.allowed, res)
			}
			if !tt.allowed && (res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, "maiden cards grant -agent "+tt.agent+" 'tool:invoke echo")) {
				t.Errorf("denial: %+v", res.Error)
			}
		})
	}
	// The exact message of the issue, for the record.
	res, _ := h.Call(context.Background(), maiden.Call{Agent: "exact", Tool: "echo", Input: `{"message":"Berlin"}`})
	want := `no card of agent "exact" allows tool:invoke echo --message=Berlin (grant it: maiden cards grant -agent exact 'tool:invoke echo --message=Berlin')`
	if res.OK || res.Error.Message != want {
		t.Errorf("got  %q\nwant %q", res.Error.Message, want)
	}
}

// TestCardsFromTheStore: cards granted and revoked through the state store
// by another handle (as `maiden cards` in another process does) count from
// the host's next call, with no restart; system cards follow agent.toml on
// reload; and a store that cannot be opened refuses the call rather than
// running it unauthorized.
func TestCardsFromTheStore(t *testing.T) {
	t.Parallel()
	body := `version = 1
[tools.echo]
path = %q
[agents.research]
tools = ["echo"]
`
	cfg := writeConfig(t, body, "echo")
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	call := func() maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: "research", Tool: "echo", Input: `{"message":"hi"}`})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call(); res.OK || res.Error.Kind != maiden.KindDenied {
		t.Fatalf("no card yet: %+v", res)
	}
	st, err := store.Open(ctx, cfg.StatePath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, err := grant.Parse("tool:invoke echo --...")
	if err != nil {
		t.Fatal(err)
	}
	card, err := st.Grant(ctx, "research", cards.Spec{LowerPos: cards.Any(g)})
	if err != nil {
		t.Fatal(err)
	}
	if res := call(); !res.OK {
		t.Fatalf("after grant: %+v", res)
	}
	if n, err := st.Revoke(ctx, store.Operator(), card.ID); err != nil || n != 1 {
		t.Fatalf("revoke: %d, %v", n, err)
	}
	if res := call(); res.OK || res.Error.Kind != maiden.KindDenied {
		t.Fatalf("after revoke: %+v", res)
	}

	// A system card comes with agent.toml and goes with it.
	h.SetConfig(writeConfigAt(t, cfg.File(), body+`grants = ["tool:invoke echo --message=hi"]`+"\n", "echo"))
	if res := call(); !res.OK {
		t.Fatalf("with a system card: %+v", res)
	}
	h.SetConfig(writeConfigAt(t, cfg.File(), body, "echo"))
	if res := call(); res.OK {
		t.Fatalf("system card removed from agent.toml, still allowed: %+v", res)
	}

	// An unusable store refuses the call.
	bad, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t), StatePath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close(ctx)
	if _, err := bad.Call(ctx, maiden.Call{Agent: "research", Tool: "echo", Input: `{}`}); !errors.Is(err, maiden.ErrState) {
		t.Errorf("store is a directory: %v", err)
	}
}

// writeConfigAt rewrites the agent.toml at path and loads it.
func writeConfigAt(t *testing.T, path, body string, tools ...string) *config.Config {
	t.Helper()
	args := make([]any, len(tools))
	for i, name := range tools {
		args[i] = testkit.Component(t, name)
	}
	if err := os.WriteFile(path, []byte(fmt.Sprintf(body, args...)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestBuiltinsOnlyForDeclaredAgents: an agent removed from agent.toml keeps
// its cards in the store, but no longer reaches the card built-ins through
// them; nor does any caller once the host is closed.
func TestBuiltinsOnlyForDeclaredAgents(t *testing.T) {
	t.Parallel()
	body := `version = 1
[tools.echo]
path = %q
[agents.other]
tools = ["echo"]
`
	lead := "[agents.lead]\ntools = [\"cards_list\"]\ngrants = [\"card:inspect *\", \"tool:invoke echo --...\"]\n"
	cfg := writeConfig(t, body+lead, "echo")
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	list := maiden.Call{Agent: "lead", Tool: "cards_list", Input: `{}`}
	if res, err := h.CallBuiltin(ctx, list); err != nil || !res.OK {
		t.Fatalf("declared agent: %+v, %v", res, err)
	}
	st, err := store.Open(ctx, cfg.StatePath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, _ := grant.Parse("card:inspect *")
	if _, err := st.Grant(ctx, "lead", cards.Spec{LowerPos: cards.Any(g)}); err != nil {
		t.Fatal(err)
	}
	h.SetConfig(writeConfigAt(t, cfg.File(), body, "echo"))
	for _, agent := range []string{"lead", "", "ghost"} {
		list.Agent = agent
		if _, err := h.CallBuiltin(ctx, list); !errors.Is(err, maiden.ErrUnknownTool) {
			t.Errorf("agent %q, not declared: %v", agent, err)
		}
	}
	h.Close(ctx)
	list.Agent = "other"
	if _, err := h.CallBuiltin(ctx, list); !errors.Is(err, maiden.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestExpiredCardLeavesTheCache: a card that expires while nothing is
// written to the store stops allowing calls at its expiry, though the
// host keeps each agent's wallet cached while the store is unchanged.
func TestExpiredCardLeavesTheCache(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "version = 1\n[tools.echo]\npath = %q\n[agents.a]\ntools = [\"echo\"]\n", "echo")
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	call := func() maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"hi"}`})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	call() // the store is opened and the agent written before the grant
	st, err := store.Open(ctx, cfg.StatePath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := grant.Parse("tool:invoke echo --...")
	// Long enough for the call below to come before it on a loaded
	// machine (400 ms was not, once, in a full run beside other work).
	expires := time.Now().Add(2 * time.Second)
	if _, err := st.Grant(ctx, "a", cards.Spec{LowerPos: cards.Any(g), Expires: expires}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if res := call(); !res.OK {
		t.Fatalf("before expiry (%v before it): %+v", time.Until(expires), res)
	}
	time.Sleep(time.Until(expires) + 100*time.Millisecond) // the card's clock, not another process
	if res := call(); res.OK || res.Error.Kind != maiden.KindDenied {
		t.Fatalf("after expiry, with the wallet cached: %+v", res)
	}
}
