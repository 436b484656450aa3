package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/maiden-run/maiden/internal/grant"
)

const agentsTools = `version = 1
[tools.weather]
path = "w.wasm"
http_allow = ["api.example.com", "*.cdn.example.com"]
secrets = ["WEATHER_TOKEN", "OTHER"]
timeout_ms = 5000
memory_mb = 64
[tools.echo]
path = "e.wasm"
`

// TestAgentsAndBindings reads both forms of an agent's tools, narrowing keys
// and system grants.
func TestAgentsAndBindings(t *testing.T) {
	src := agentsTools + `
[agents.research]
tools = ["echo", "weather", "cards_list"]
grants = ["tool:invoke weather --city=Par*", { grant = "network:connect api.example.com", budget = "calls=10,bytes_out=4096" }]

[agents.coder.tools.echo]
[agents.coder.tools.weather]
http_allow = ["api.example.com", "a.cdn.example.com"]
secrets = ["WEATHER_TOKEN"]
timeout_ms = 1000
memory_mb = 16

[state]
path = "state/maiden.db"
`
	cfg, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Implicit() {
		t.Error("Implicit with agents declared")
	}
	if got := cfg.StatePath(); got != "/cfg/state/maiden.db" {
		t.Errorf("state path %q", got)
	}
	want := []Agent{
		{Name: "coder", Line: 15, Boundary: DefaultBoundary(), Bindings: []Binding{
			{Tool: "echo", Line: 15},
			{Tool: "weather", Line: 16, HTTPAllow: []string{"api.example.com", "a.cdn.example.com"}, Secrets: []string{"WEATHER_TOKEN"}, Timeout: time.Second, MemoryBytes: 16 << 20},
		}},
		{Name: "research", Line: 11, Boundary: DefaultBoundary(), Bindings: []Binding{
			{Tool: "cards_list", Builtin: true, Line: 12},
			{Tool: "echo", Line: 12},
			{Tool: "weather", Line: 12},
		}, Grants: []SystemGrant{
			{Text: "tool:invoke weather --city=Par*", Line: 13},
			{Text: "network:connect api.example.com", Line: 13, Budget: map[string]int64{"calls": 10, "bytes_out": 4096}},
		}},
	}
	if diff := cmp.Diff(want, cfg.Agents(), cmpopts.IgnoreTypes(grant.Grant{})); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}
	r, _ := cfg.Agent("research")
	if g := r.Grants[0].Grant; g.Class != grant.Tool || g.Verb != "invoke" {
		t.Errorf("grant parsed as %+v", g)
	}
	if _, ok := r.Binding("weather"); !ok {
		t.Error("Binding(weather) not found")
	}
	if _, ok := r.Binding("nope"); ok {
		t.Error("Binding(nope) found")
	}
	if b, agentOK, bound := cfg.AgentBinding("coder", "weather"); !agentOK || !bound || b.Timeout != time.Second {
		t.Errorf("AgentBinding(coder, weather) = %+v, %v, %v", b, agentOK, bound)
	}
	if _, agentOK, bound := cfg.AgentBinding("coder", "cards_list"); !agentOK || bound {
		t.Errorf("AgentBinding(coder, cards_list) = %v, %v", agentOK, bound)
	}
	if _, agentOK, _ := cfg.AgentBinding("nobody", "echo"); agentOK {
		t.Error("AgentBinding(nobody) found the agent")
	}
	// Copies: changing one does not change the configuration.
	r.Bindings[0].Tool = "x"
	if again, _ := cfg.Agent("research"); again.Bindings[0].Tool != "cards_list" {
		t.Error("Agent shares its bindings")
	}
}

// TestNoAgentsIsImplicit: a file without [agents] is the implicit agent,
// with the store next to agent.toml.
func TestNoAgentsIsImplicit(t *testing.T) {
	cfg, err := parse("agent.toml", []byte(agentsTools), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Implicit() || len(cfg.Agents()) != 0 {
		t.Errorf("implicit %v, agents %v", cfg.Implicit(), cfg.Agents())
	}
	if got := cfg.StatePath(); got != filepath.Join("/cfg", DefaultStateFile) {
		t.Errorf("state path %q", got)
	}
}

// TestMaxPending: an agent's max_pending, else DefaultMaxPending, for an
// agent that does not set it, an undeclared one and the implicit one.
func TestMaxPending(t *testing.T) {
	cfg, err := parse("agent.toml", []byte(agentsTools+"[agents.busy]\ntools = [\"echo\"]\nmax_pending = 250\n[agents.quiet]\ntools = [\"echo\"]\n"), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	for agent, want := range map[string]int{"busy": 250, "quiet": DefaultMaxPending, "nobody": DefaultMaxPending} {
		if got := cfg.MaxPending(agent); got != want {
			t.Errorf("MaxPending(%q) = %d, want %d", agent, got, want)
		}
	}
	if a, _ := cfg.Agent("busy"); a.MaxPending != 250 {
		t.Errorf("Agent(busy).MaxPending = %d", a.MaxPending)
	}
	implicit, err := parse("agent.toml", []byte(agentsTools), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := implicit.MaxPending(DefaultAgent); got != DefaultMaxPending {
		t.Errorf("the implicit agent's MaxPending = %d, want %d", got, DefaultMaxPending)
	}
}

// TestAgentErrors: a binding can only narrow, names only known tools, and a
// malformed grant is refused with its column; each with its line. A binding
// of a tool whose own table is broken is not a second error (issue 27,
// rough edge 3).
func TestAgentErrors(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"unknown tool", "[agents.a]\ntools = [\"echo\", \"nope\"]\n", []string{
			`agent.toml:12: agents.a.tools[1]: unknown tool "nope": not in [tools] and not a built-in`,
		}},
		{"tool whose table is broken (only its own error)", "[tools.greet]\npath = \"e.wasm\"\ntimeout_ms = 0\n[agents.a]\ntools = [\"greet\"]\n[agents.b.tools.greet]\n", []string{
			"agent.toml:13: tools.greet.timeout_ms: must be an integer in 1..600000, got 0",
		}},
		{"import whose table is broken (only its own error)", "[mcp.up]\ncommand = [\"node\"]\n[agents.a]\ntools = [\"up\"]\n", []string{
			`agent.toml:12: mcp.up.command[0]: the program must be an absolute path`,
		}},
		{"listed twice", "[agents.a]\ntools = [\"echo\", \"echo\"]\n", []string{
			`agent.toml:12: agents.a.tools[1]: tool "echo" is listed twice`,
		}},
		{"host the tool does not allow", "[agents.a.tools.weather]\nhttp_allow = [\"evil.example\", \"*.example.com\", \"x.y.cdn.example.com\"]\n", []string{
			`agent.toml:12: agents.a.tools.weather.http_allow[0]: "evil.example" is not allowed by the tool itself (tools.weather.http_allow: api.example.com, *.cdn.example.com): a binding can only narrow`,
			`agent.toml:12: agents.a.tools.weather.http_allow[1]: "*.example.com" is not allowed by the tool itself`,
			`agent.toml:12: agents.a.tools.weather.http_allow[2]: "x.y.cdn.example.com" is not allowed by the tool itself`,
		}},
		{"host on a tool without network", "[agents.a.tools.echo]\nhttp_allow = [\"api.example.com\"]\n", []string{
			`agent.toml:12: agents.a.tools.echo.http_allow[0]: "api.example.com" is not allowed by the tool itself (tools.echo.http_allow: none)`,
		}},
		{"secret the tool does not have", "[agents.a.tools.weather]\nsecrets = [\"ROOT_KEY\"]\n", []string{
			`agent.toml:12: agents.a.tools.weather.secrets[0]: secret "ROOT_KEY" is not in the tool's own secrets (tools.weather.secrets: WEATHER_TOKEN, OTHER)`,
		}},
		{"timeout upward", "[agents.a.tools.weather]\ntimeout_ms = 6000\n", []string{
			"agent.toml:12: agents.a.tools.weather.timeout_ms: must be an integer in 1..5000, got 6000",
		}},
		{"memory upward", "[agents.a.tools.echo]\nmemory_mb = 65\n", []string{
			"agent.toml:12: agents.a.tools.echo.memory_mb: must be an integer in 1..64, got 65",
		}},
		{"unknown narrowing key", "[agents.a.tools.echo]\nhttp_ports = [8443]\n", []string{
			"agent.toml:12: agents.a.tools.echo.http_ports: unknown key; valid keys here: http_allow, secrets, timeout_ms, memory_mb",
		}},
		{"built-in narrowed", "[agents.a.tools.cards_list]\ntimeout_ms = 5\n", []string{
			`agent.toml:11: agents.a.tools.cards_list: "cards_list" is a built-in tool: it has no policy to narrow`,
		}},
		{"malformed grant", "[agents.a]\ngrants = [\"tool:invoke echo\", \"tool:fly echo\"]\n", []string{
			`agent.toml:12: agents.a.grants[1]: at column 6 of "tool:fly echo": expected`,
		}},
		{"malformed budget", "[agents.a]\ngrants = [{ grant = \"tool:invoke echo\", budget = \"calls=-1\" }, { grant = \"tool:invoke echo\", budgets = \"calls=1\" }, { budget = \"calls=1\" }, 5]\n", []string{
			`agent.toml:12: agents.a.grants[0].budget: bad budget: calls=-1: expected a whole number from 0 to`,
			`agent.toml:12: agents.a.grants[1].budgets: unknown key (did you mean "budget"?)`,
			`agent.toml:12: agents.a.grants[2].grant: required key is missing`,
			`agent.toml:12: agents.a.grants[3]: must be a grant string or a table`,
		}},
		{"bad tool cost", "[tools.costly]\npath = \"e.wasm\"\ncost = 0\n", []string{
			"agent.toml:13: tools.costly.cost: must be an integer in 1..1000000000, got 0",
		}},
		{"bad agent name", "[agents.Research]\ntools = [\"echo\"]\n", []string{
			`agent.toml:11: agents.Research: invalid agent name "Research"`,
		}},
		{"max_pending out of range or not a number", "[agents.a]\nmax_pending = 0\n[agents.b]\nmax_pending = 10001\n[agents.c]\nmax_pending = \"many\"\n", []string{
			"agent.toml:12: agents.a.max_pending: must be an integer in 1..10000, got 0",
			"agent.toml:14: agents.b.max_pending: must be an integer in 1..10000, got 10001",
			"agent.toml:16: agents.c.max_pending: must be an integer in 1..10000, got string \"many\"",
		}},
		{"unknown agent key", "[agents.a]\ntool = [\"echo\"]\n", []string{
			`agent.toml:12: agents.a.tool: unknown key (did you mean "tools"?)`,
		}},
		{"empty agents", "[agents]\n", []string{
			`agent.toml:11: agents: declares no agent`,
		}},
		{"state path not a string", "[state]\npath = 5\n", []string{
			`agent.toml:12: state.path: must be a string, got integer 5`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := agentsTools + "\n" + tt.src
			_, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t))
			if err == nil {
				t.Fatal("accepted")
			}
			errs := err.(Errors)
			if len(errs) != len(tt.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(errs), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d:\n got %s\nwant %s...", i, errs[i], w)
				}
			}
		})
	}
}

// TestStateURL: [state] url selects PostgreSQL; a password in it, a URL of
// another scheme, or url together with path is refused with its line, and
// the message never repeats the password.
func TestStateURL(t *testing.T) {
	for _, u := range []string{
		"postgres://maiden@db.internal:5432/maiden?sslmode=verify-full",
		"postgresql://maiden@127.0.0.1/state",
		"postgres:///maiden?host=/run/postgresql",
	} {
		cfg, err := parse("agent.toml", []byte(agentsTools+"\n[state]\nurl = \""+u+"\"\n"), "/cfg", fakeFiles(t))
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if cfg.StatePath() != u || cfg.StateURL() != u || !IsStateURL(cfg.StatePath()) {
			t.Errorf("%s: StatePath %q, StateURL %q", u, cfg.StatePath(), cfg.StateURL())
		}
	}
	cfg, err := parse("agent.toml", []byte(agentsTools+"\n[state]\npath = \"s.db\"\n"), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StateURL() != "" || IsStateURL(cfg.StatePath()) {
		t.Errorf("a file store reads as a URL: %q", cfg.StatePath())
	}

	const secret = "hunter2-s3cret"
	for _, tt := range []struct{ name, src, want string }{
		{"password in the user part", "[state]\nurl = \"postgres://maiden:" + secret + "@db/maiden\"\n",
			`agent.toml:12: state.url: the URL carries a password: remove it and set PGPASSWORD or a ~/.pgpass entry instead`},
		{"empty password", "[state]\nurl = \"postgres://maiden:@db/maiden\"\n",
			`agent.toml:12: state.url: the URL carries a password`},
		{"password parameter", "[state]\nurl = \"postgres://maiden@db/maiden?sslmode=require&PassWord=" + secret + "\"\n",
			`agent.toml:12: state.url: the URL carries a password parameter`},
		{"sslpassword parameter", "[state]\nurl = \"postgres://maiden@db/maiden?sslmode=verify-full&sslkey=/k.pem&SSLPassword=" + secret + "\"\n",
			`agent.toml:12: state.url: the URL carries an sslpassword parameter (the passphrase of the client key): remove it and set PGSSLPASSWORD instead`},
		{"other scheme", "[state]\nurl = \"mysql://maiden@db/maiden\"\n",
			`agent.toml:12: state.url: scheme "mysql": want postgres:// or postgresql://`},
		{"not a URL", "[state]\nurl = \"postgres://maiden:" + secret + "@db:port/x\"\n",
			`agent.toml:12: state.url: not a valid URL`},
		{"key/value string", "[state]\nurl = \"host=db password=" + secret + "\"\n",
			`agent.toml:12: state.url: scheme "": want postgres:// or postgresql://`},
		{"both", "[state]\npath = \"s.db\"\nurl = \"postgres://maiden@db/maiden\"\n",
			`agent.toml:13: state: path (line 12) and url (line 13) are mutually exclusive`},
		{"URL as a path", "[state]\npath = \"postgres://maiden@db/maiden\"\n",
			`agent.toml:12: state.path: is a file; a PostgreSQL database goes in state.url`},
		{"unknown key", "[state]\ndsn = \"x\"\n",
			`agent.toml:12: state.dsn: unknown key; valid keys here: path, url`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse("agent.toml", []byte(agentsTools+"\n"+tt.src), "/cfg", fakeFiles(t))
			if err == nil {
				t.Fatal("accepted")
			}
			errs := err.(Errors)
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tt.want) {
				t.Fatalf("got %v\nwant one error starting %s", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error repeats the password: %v", err)
			}
		})
	}
}
