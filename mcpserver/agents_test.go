package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// agentsEnv is a host over an agent.toml declaring agents, its MCP server,
// and the state store opened a second time, as the CLI would.
type agentsEnv struct {
	*env
	st store.Store
}

// agentsTOML binds alice to echo and the card built-ins, bob to echo and
// logger.
const agentsTOML = `
[agents.alice]
tools = ["echo", "cards_derive", "cards_list", "cards_revoke", "cards_transfer"]

[agents.bob]
tools = ["echo", "logger"]
`

func newAgentsEnv(t *testing.T, agents string) *agentsEnv {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.toml")
	writeAgentTOML(t, path, []toolLine{{"echo", "echo", ""}, {"logger", "logger", ""}})
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(agents); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state.db")
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t), StatePath: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	s := New(h, &Options{ProgressEvery: 200 * time.Millisecond})
	if _, err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), state, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, a := range cfg.Agents() {
		if err := st.EnsureAgent(context.Background(), a.Name); err != nil {
			t.Fatal(err)
		}
	}
	return &agentsEnv{env: &env{t: t, cfg: path, host: h, server: s}, st: st}
}

func (e *agentsEnv) token(agent string) (token, id string) {
	e.t.Helper()
	tok, info, err := e.st.MintToken(context.Background(), agent)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok, info.ID
}

func (e *agentsEnv) grant(agent string, grants ...string) cards.Card {
	e.t.Helper()
	var gs []grant.Grant
	for _, s := range grants {
		g, err := grant.Parse(s)
		if err != nil {
			e.t.Fatal(err)
		}
		gs = append(gs, g)
	}
	c, err := e.st.Grant(context.Background(), agent, cards.Spec{LowerPos: cards.Any(gs...)})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func bearer(token string) *http.Client {
	return &http.Client{Transport: headerTransport{http.Header{"Authorization": {"Bearer " + token}}}}
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// TestAgentsOverHTTP: each request's token names its agent, in both eras;
// each agent sees its own tools; a call its cards do not allow is denied
// with the grant to paste; an unbound tool does not exist for it; a
// revocation holds from the next call, and a revoked token is refused on
// the next request of a session already open.
func TestAgentsOverHTTP(t *testing.T) {
	t.Parallel()
	e := newAgentsEnv(t, agentsTOML)
	srv := e.httpServer(HTTPOptions{AuthToken: "static-token-ignored"})
	aliceTok, aliceID := e.token("alice")
	bobTok, _ := e.token("bob")
	echoCard := e.grant("alice", "tool:invoke echo --...")

	for _, era := range []string{legacyProtocol, ModernProtocol} {
		t.Run(era, func(t *testing.T) {
			alice, err := e.httpClientEra(srv.URL, bearer(aliceTok), era, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer alice.Close()
			bob, err := e.httpClientEra(srv.URL, bearer(bobTok), era, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer bob.Close()
			// alice's card allows no card:* verb, so no built-in is listed.
			if got := toolNames(t, alice); !slices.Equal(got, []string{"echo"}) {
				t.Errorf("alice sees %v, want [echo]", got)
			}
			if got := toolNames(t, bob); !slices.Equal(got, []string{"echo", "logger"}) {
				t.Errorf("bob sees %v, want [echo logger]", got)
			}
			if r := call(t, alice, "echo", map[string]any{"message": "hi"}); r.IsError {
				t.Errorf("alice echo: %s", text(r))
			}
			r := call(t, bob, "logger", map[string]any{})
			want := `denied: no card of agent "bob" allows tool:invoke logger (grant it: maiden cards grant -agent bob 'tool:invoke logger')`
			if !r.IsError || text(r) != want {
				t.Errorf("bob logger: isError=%v %q, want %q", r.IsError, text(r), want)
			}
			// logger is not bound to alice: it does not exist for her.
			if _, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "logger", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
				t.Errorf("alice calling the unbound logger: %v, want unknown tool", err)
			}
		})
	}

	// Static -auth-token-env tokens count for nothing once agents exist;
	// nor does a missing or malformed token. All are 403 naming the header.
	for name, hdr := range map[string]string{"none": "", "static": "Bearer static-token-ignored", "garbage": "Bearer mdn_nope", "basic": "Basic " + aliceTok} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if hdr != "" {
			req.Header.Set("Authorization", hdr)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "Bearer") {
			t.Errorf("token %s: %d %s, want 403 naming the header", name, resp.StatusCode, body)
		}
	}

	// A revocation made elsewhere (here: another handle on the store, as
	// the CLI) holds from the next call of an open session.
	alice, err := e.httpClient(srv.URL, bearer(aliceTok))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if r := call(t, alice, "echo", map[string]any{"message": "before"}); r.IsError {
		t.Fatalf("before revocation: %s", text(r))
	}
	if _, err := e.st.Revoke(context.Background(), store.Operator(), echoCard.ID); err != nil {
		t.Fatal(err)
	}
	if r := call(t, alice, "echo", map[string]any{"message": "after"}); !r.IsError || !strings.HasPrefix(text(r), "denied: ") {
		t.Errorf("after the card's revocation: isError=%v %q, want denied", r.IsError, text(r))
	}
	// A revoked token is refused on the very next request of that session.
	if err := e.st.RevokeToken(context.Background(), aliceID); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.ListTools(context.Background(), nil); err == nil {
		t.Error("a request with a revoked token on an open session was served")
	}
}

// TestSessionBinding: agent B's valid token on agent A's session ID is
// refused, for every method of the session (POST, the GET stream,
// DELETE), and does not reach A's tools; A goes on unharmed. The refusal
// is the answer a session that never existed gets, byte for byte, as is
// that of another token of A (TestLegacySessionBoundToToken): a distinct
// answer for another agent's session told a caller that the ID it holds
// (guessed, or leaked from a log) is a live session. The operator's log
// says who was refused on whose session, with no token in it.
func TestSessionBinding(t *testing.T) {
	t.Parallel()
	e := newAgentsEnv(t, agentsTOML)
	var oplog testkit.SyncBuffer
	e.server.log = slog.New(slog.NewTextHandler(&oplog, nil))
	srv := e.httpServer(HTTPOptions{})
	aliceTok, _ := e.token("alice")
	alice2Tok, _ := e.token("alice")
	bobTok, bobID := e.token("bob")
	e.grant("alice", "tool:invoke echo --...")
	e.grant("bob", "tool:invoke echo --...", "tool:invoke logger")
	alice, err := e.httpClient(srv.URL, bearer(aliceTok))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	sid := alice.ID()
	if sid == "" {
		t.Fatal("no session ID")
	}
	const notFound = "maiden: session not found (it expired or never existed; initialize a new one)\n"
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		body := ""
		if m == http.MethodPost {
			body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hijack"}}}`
		}
		for _, tc := range []struct{ name, tok, sid string }{
			{"bob's token on a session nobody opened", bobTok, "made-up-session"},
			{"bob's token on alice's session", bobTok, sid},
			{"alice's other token on alice's session", alice2Tok, sid},
		} {
			code, got := rawLegacy(t, srv.URL, m, tc.tok, tc.sid, body)
			if code != http.StatusNotFound || got != notFound {
				t.Errorf("%s, %s: %d %q; want %d %q", tc.name, m, code, got, http.StatusNotFound, notFound)
			}
		}
	}
	log := oplog.String()
	if !strings.Contains(log, `msg="refused a request on another agent's session" agent=bob credential=token:`+bobID+` owner=alice`) {
		t.Errorf("the operator's log does not name bob refused on alice's session:\n%s", log)
	}
	for _, tok := range []string{aliceTok, alice2Tok, bobTok} {
		if strings.Contains(log, tok) {
			t.Errorf("the operator's log holds a token:\n%s", log)
		}
	}
	// alice's session was not closed by bob's DELETE, nor reached by his POST.
	if r := call(t, alice, "echo", map[string]any{"message": "still mine"}); r.IsError {
		t.Errorf("alice after the attempts: %s", text(r))
	}
}

// TestStdioAgent: a server for one agent (maiden serve -agent) lists that
// agent's tools and runs every call as it.
func TestStdioAgent(t *testing.T) {
	t.Parallel()
	e := newAgentsEnv(t, agentsTOML)
	e.grant("bob", "tool:invoke echo --message=hello")
	s := New(e.host, &Options{Agent: "bob"})
	if _, err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.server = s
	cs := e.client(nil)
	if got := toolNames(t, cs); !slices.Equal(got, []string{"echo", "logger"}) {
		t.Errorf("bob sees %v", got)
	}
	if r := call(t, cs, "echo", map[string]any{"message": "hello"}); r.IsError {
		t.Errorf("allowed call: %s", text(r))
	}
	r := call(t, cs, "echo", map[string]any{"message": "other"})
	if !r.IsError || !strings.Contains(text(r), `no card of agent "bob" allows tool:invoke echo --message=other`) {
		t.Errorf("call outside the card: %q", text(r))
	}
}

func callJSON(t *testing.T, cs *mcp.ClientSession, tool string, args any) (map[string]any, *mcp.CallToolResult) {
	t.Helper()
	r := call(t, cs, tool, args)
	var out map[string]any
	if !r.IsError {
		if err := json.Unmarshal([]byte(text(r)), &out); err != nil {
			t.Fatalf("%s: output %q: %v", tool, text(r), err)
		}
	}
	return out, r
}

// TestBuiltins: the card built-ins are listed for an agent only if bound
// and allowed by its cards; derivation is attenuation only; revocation
// cascades; and the listing follows the store.
func TestBuiltins(t *testing.T) {
	t.Parallel()
	e := newAgentsEnv(t, agentsTOML)
	srv := e.httpServer(HTTPOptions{})
	aliceTok, _ := e.token("alice")
	bobTok, _ := e.token("bob")
	alice, err := e.httpClient(srv.URL, bearer(aliceTok))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, err := e.httpClient(srv.URL, bearer(bobTok))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()

	// Bound but no card: not listed, and calling one is unknown tool.
	if got := toolNames(t, alice); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("alice without cards sees %v", got)
	}
	if _, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "cards_list", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("cards_list without a card: %v, want unknown tool", err)
	}
	parent := e.grant("alice", "tool:invoke echo --...", "card:derive *", "card:revoke *", "card:inspect *", "card:install bob")
	if got := toolNames(t, alice); !slices.Equal(got, []string{"cards_derive", "cards_list", "cards_revoke", "echo"}) {
		t.Errorf("alice with derive, revoke, inspect sees %v (cards_transfer needs card:transfer)", got)
	}
	// Not bound: bob holds card:* grants but binds no built-in.
	e.grant("bob", "card:derive *", "card:inspect *")
	if got := toolNames(t, bob); !slices.Equal(got, []string{"echo", "logger"}) {
		t.Errorf("bob sees %v: built-ins he does not bind", got)
	}

	out, r := callJSON(t, alice, "cards_list", map[string]any{})
	if r.IsError || len(out["cards"].([]any)) != 1 {
		t.Fatalf("cards_list: %s", text(r))
	}

	// Placing a card in a wallet needs card:install for it (CARDS.md,
	// Install): alice may install in bob's wallet, not in her own.
	_, r = callJSON(t, alice, "cards_derive", map[string]any{"card": parent.ID, "to": "alice", "grants": []string{"tool:invoke echo --message=hi"}})
	if !r.IsError || !strings.HasPrefix(text(r), "denied: ") || !strings.Contains(text(r), "card:install alice") {
		t.Errorf("derive for alice without card:install alice: %q", text(r))
	}
	// Broadening is refused with the store's named error.
	_, r = callJSON(t, alice, "cards_derive", map[string]any{"card": parent.ID, "to": "bob", "grants": []string{"tool:invoke logger"}})
	if !r.IsError || !strings.HasPrefix(text(r), "denied: ") || !strings.Contains(text(r), "lower-bound-too-broad") {
		t.Errorf("broadening derive: %q", text(r))
	}
	// A malformed grant says where and what was expected.
	_, r = callJSON(t, alice, "cards_derive", map[string]any{"card": parent.ID, "to": "bob", "grants": []string{"tool:invok echo"}})
	if !r.IsError || !strings.HasPrefix(text(r), "input: ") || !strings.Contains(text(r), "column") || !strings.Contains(text(r), "expected") {
		t.Errorf("malformed grant: %q", text(r))
	}
	// A card alice does not hold cannot be derived from.
	bobCard := e.grant("bob", "tool:invoke logger")
	_, r = callJSON(t, alice, "cards_derive", map[string]any{"card": bobCard.ID, "to": "alice", "grants": []string{"tool:invoke logger"}})
	if !r.IsError || !strings.Contains(text(r), "not allowed") {
		t.Errorf("deriving from bob's card: %q", text(r))
	}
	out, r = callJSON(t, alice, "cards_derive", map[string]any{"card": parent.ID, "to": "bob", "grants": []string{"tool:invoke echo --message=hi"}})
	if r.IsError {
		t.Fatalf("derive: %s", text(r))
	}
	if id, _ := out["id"].(string); id == "" {
		t.Errorf("derive: no id in %s", text(r))
	} else if child, err := e.st.Card(context.Background(), id); err != nil || child.Holder != "bob" || !slices.Equal(child.Parents, []string{parent.ID}) || child.Manager != "alice" && child.Manager != "agent:alice" {
		t.Errorf("derived card %s: %+v %v; want bob's, parent %s, managed by alice", id, child, err, parent.ID)
	}
	if r := call(t, bob, "echo", map[string]any{"message": "hi"}); r.IsError {
		t.Errorf("bob with the derived card: %s", text(r))
	}
	if r := call(t, bob, "echo", map[string]any{"message": "ho"}); !r.IsError {
		t.Errorf("bob outside the derived card was allowed")
	}

	// Revoking the parent takes the child with it.
	out, r = callJSON(t, alice, "cards_revoke", map[string]any{"card": parent.ID})
	if r.IsError || out["revoked"] != float64(2) {
		t.Fatalf("cards_revoke: %s, want revoked 2", text(r))
	}
	if r := call(t, bob, "echo", map[string]any{"message": "hi"}); !r.IsError || !strings.HasPrefix(text(r), "denied: ") {
		t.Errorf("bob after the cascade: %q", text(r))
	}
	// alice's built-ins went with her card.
	if got := toolNames(t, alice); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("alice after revoking her card sees %v", got)
	}
}

// TestWatchToolBuiltLater: a tool added to agent.toml before its .wasm
// exists makes the reload fail; creating the file (maiden build) then
// reloads without agent.toml being saved again.
func TestWatchToolBuiltLater(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloads := make(chan error, 16)
	e.server.Watch(ctx, e.cfg, WatchOptions{Interval: 20 * time.Millisecond, Settle: 50 * time.Millisecond, OnReload: func(err error, _ []Problem) { reloads <- err }})
	later := filepath.Join(filepath.Dir(e.cfg), "later.wasm")
	writeAgentTOML(t, e.cfg, []toolLine{{"echo", "echo", ""}, {"later", later, ""}})
	select {
	case err := <-reloads:
		if !errors.As(err, new(config.Errors)) {
			t.Fatalf("reload with a missing tool file: %v, want config errors", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reload after agent.toml changed")
	}
	wasm, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(later, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-reloads:
		if err != nil {
			t.Fatalf("reload after the tool file appeared: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the tool file appeared and nothing reloaded")
	}
	cs := e.client(nil)
	if got := toolNames(t, cs); !slices.Equal(got, []string{"echo", "later"}) {
		t.Errorf("after the build: %v", got)
	}
}

// reloadHook is a slog handler that runs do, once, when the watch logs a
// reload: the moment an operator (or a script waiting for the line) saves
// the next edit.
type reloadHook struct {
	slog.Handler
	once *sync.Once
	do   func()
}

func (h reloadHook) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "reloaded" {
		h.once.Do(h.do)
	}
	return nil
}

// Enabled: slog asks before Handle, and the wrapped DiscardHandler says no.
func (h reloadHook) Enabled(context.Context, slog.Level) bool { return true }
func (h reloadHook) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h reloadHook) WithGroup(string) slog.Handler            { return h }

// TestWatchEditRightAfterReload: an edit saved as soon as a reload's line
// is logged is loaded too (it once was taken as already loaded and lost:
// cmd/maiden's TestServeReloadLog flaked on it).
func TestWatchEditRightAfterReload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, []toolLine{{"echo", "echo", ""}}, nil)
	broken := make(chan error, 1)
	e.server.log = slog.New(reloadHook{Handler: slog.DiscardHandler, once: new(sync.Once), do: func() {
		broken <- os.WriteFile(e.cfg, []byte("version = 1\nbroken = [\n"), 0o644)
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloads := make(chan error, 16)
	e.server.Watch(ctx, e.cfg, WatchOptions{Interval: 20 * time.Millisecond, Settle: 50 * time.Millisecond, OnReload: func(err error, _ []Problem) { reloads <- err }})
	writeAgentTOML(t, e.cfg, []toolLine{{"echo", "echo", ""}, {"logger", "logger", ""}})
	next := func(what string) error {
		t.Helper()
		select {
		case err := <-reloads:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("no reload after %s", what)
			return nil
		}
	}
	if err := next("the first edit"); err != nil {
		t.Fatalf("the first edit: %v", err)
	}
	select {
	case err := <-broken:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("the reload logged no line")
	}
	if err := next("the edit saved as the first reload was logged"); !errors.As(err, new(config.Errors)) {
		t.Fatalf("the edit saved as the first reload was logged: %v, want config errors", err)
	}
}
