package session

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// The session gate (Gate.Hold, Gate.Recheck, Gate.CLIWritable) against a
// real SQLite store, written when planted bugs in it left the package's
// own suite green (docs/security-tests.md, "The session gate and the
// state store's authority under mutation").

var errTestState = errors.New("state store failed")

// gateConfig is a configuration of two agents: a (network off, /srv/work
// writable, /srv/docs readable) and b (the default boundary: network on).
func gateConfig(t *testing.T) *config.Config {
	t.Helper()
	file := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(file, []byte(`version = 1
[agents.a]
grants = ["tool:invoke fs_read --..."]
[agents.a.boundary]
network = false
fs = [{ path = "/srv/work", access = "write", match = "subtree" }, { path = "/srv/docs", access = "read", match = "subtree" }]
[agents.b]
grants = ["tool:invoke fs_read --..."]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// newGate is a Gate on a new SQLite store, and the store.
func newGate(t *testing.T) (*Gate, *store.DB) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &Gate{State: func(context.Context, *config.Config) (store.Store, error) { return st, nil }, ErrState: errTestState}, st
}

func walletOf(t *testing.T, agent string, grants ...string) *cards.Wallet {
	t.Helper()
	return cards.NewWallet(agent, time.Now(), []cards.Card{{ID: "c", Holder: agent, Spec: cards.Spec{LowerPos: grantsOf(t, grants)}}})
}

// structuredReason is the reason of a ToolError's structured error.
func structuredReason(terr *api.ToolError) string {
	var ce boundary.CommandError
	if terr == nil || json.Unmarshal(terr.Structured, &ce) != nil {
		return ""
	}
	return ce.Reason
}

// TestGateNetworkNeedsTheSessionsBoundary: a tool whose policy reaches the
// network (an http allowlist, or CIDR ranges alone) is refused before it
// runs in a session whose boundary has network off (the agent's configured
// boundary, not the default one), with sandbox_boundary_required and the
// expansion to ask for; a boundary maiden cannot widen (external) is
// network_not_allowed; a session with network on lets it through.
func TestGateNetworkNeedsTheSessionsBoundary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := gateConfig(t)
	g, _ := newGate(t)
	for _, tool := range []config.Tool{
		{Name: "fetcher", HTTPAllow: []string{"api.example.com"}},
		{Name: "ranger", HTTPAllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
	} {
		c := &Call{Cfg: cfg, Agent: "a", ID: "sa", Tool: &tool, Preopens: true}
		dirs, terr, err := g.Hold(ctx, c)
		if err != nil || terr == nil || terr.Kind != api.KindDenied || structuredReason(terr) != boundary.ReasonBoundaryRequired ||
			!strings.Contains(string(terr.Structured), `"network":{"enabled":true}`) {
			t.Errorf("%s in a session of a (network off): dirs %v, refusal %+v, err %v; want denied, sandbox_boundary_required asking for network", tool.Name, dirs, terr, err)
		}
		c = &Call{Cfg: cfg, Agent: "b", ID: "sb", Tool: &tool}
		if _, terr, err := g.Hold(ctx, c); terr != nil || err != nil {
			t.Errorf("%s in a session of b (network on): refusal %+v, err %v; want it through", tool.Name, terr, err)
		}
	}
	ext := store.Session{ID: "sx", Boundary: boundary.Boundary{Kind: boundary.External, Filesystem: boundary.Restricted, Network: true}}
	if terr := NetworkRefusal(ext, config.Tool{Name: "fetcher"}); structuredReason(terr) != "network_not_allowed" {
		t.Errorf("an external boundary: refusal %+v; want network_not_allowed", terr)
	}
}

// TestGateRefusesAnotherAgentsSession: a session belongs to the agent that
// opened it. Another agent naming its ID is refused (denied, "belongs to
// another agent") whatever the call needs of it (network, a file
// built-in's path, preopens, a wrapped CLI's write paths), both by a gate
// that has the session in its cache and by a fresh one; nothing is given.
func TestGateRefusesAnotherAgentsSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := gateConfig(t)
	g, st := newGate(t)
	if _, _, err := st.OpenSession(ctx, "shared", "a", Initial(cfg, "a")); err != nil {
		t.Fatal(err)
	}
	wasm := config.Tool{Name: "w", FS: config.FSWrite}
	// a's own call puts the session in g's cache.
	if dirs, terr, err := g.Hold(ctx, &Call{Cfg: cfg, Agent: "a", ID: "shared", Tool: &wasm, Preopens: true}); terr != nil || err != nil || len(dirs) != 2 {
		t.Fatalf("a in its own session: dirs %v, refusal %+v, err %v", dirs, terr, err)
	}
	fresh, _ := newGate(t)
	fresh.State = g.State
	calls := map[string]func() *Call{
		"network": func() *Call {
			return &Call{Cfg: cfg, Agent: "b", ID: "shared", Tool: &config.Tool{Name: "fetcher", HTTPAllow: []string{"api.example.com"}}}
		},
		"file built-in": func() *Call {
			return &Call{Cfg: cfg, Agent: "b", ID: "shared", Tool: &config.Tool{Name: "fs_read"}, Files: true, Input: `{"path":"/srv/work/a"}`,
				Wallet: walletOf(t, "b", "fs /**")}
		},
		"preopens": func() *Call {
			return &Call{Cfg: cfg, Agent: "b", ID: "shared", Tool: &wasm, Preopens: true}
		},
	}
	for name, mk := range calls {
		for gname, gate := range map[string]*Gate{"cached": g, "fresh": fresh} {
			c := mk()
			dirs, terr, err := gate.Hold(ctx, c)
			if err != nil || terr == nil || terr.Kind != api.KindDenied || !strings.Contains(terr.Message, `session "shared" belongs to another agent`) || dirs != nil || c.Sess != nil {
				t.Errorf("%s, %s gate: b naming a's session: dirs %v, refusal %+v, err %v, session %v; want denied, belongs to another agent", name, gname, dirs, terr, err, c.Sess)
			}
		}
	}
}

// TestGateCLIInAnotherAgentsSession: a wrapped CLI of an agent with a
// declared boundary, in another agent's session, is refused the same way
// (CLIWritable, through Hold).
func TestGateCLIInAnotherAgentsSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := gateConfig(t)
	g, st := newGate(t)
	if _, _, err := st.OpenSession(ctx, "shared", "b", Initial(cfg, "b")); err != nil {
		t.Fatal(err)
	}
	cli := config.Tool{Name: "git", CLI: &config.CLI{WritePaths: []string{"/srv/work"}}}
	c := &Call{Cfg: cfg, Agent: "a", ID: "shared", Tool: &cli, Wallet: walletOf(t, "a", "fs /**")}
	_, terr, err := g.Hold(ctx, c)
	if err != nil || terr == nil || terr.Kind != api.KindDenied || !strings.Contains(terr.Message, "belongs to another agent") {
		t.Errorf("a's CLI in b's session: refusal %+v, err %v; want denied, belongs to another agent", terr, err)
	}
}

// TestGateEndedSession: a call naming a session that ended is refused as
// the caller's mistake (kind input, "ended"), not reported as a failing
// store.
func TestGateEndedSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := gateConfig(t)
	g, st := newGate(t)
	if _, _, err := st.OpenSession(ctx, "gone", "b", Initial(cfg, "b")); err != nil {
		t.Fatal(err)
	}
	if err := st.EndSession(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	_, terr, err := g.Hold(ctx, &Call{Cfg: cfg, Agent: "b", ID: "gone", Tool: &config.Tool{Name: "fetcher", HTTPAllow: []string{"x.example"}}})
	if err != nil || terr == nil || terr.Kind != api.KindInput || !strings.Contains(terr.Message, "ended") {
		t.Errorf("a call in an ended session: refusal %+v, err %v; want kind input naming the session ended", terr, err)
	}
}

// TestGateFileBuiltinHeldToFsCards: a file built-in's path is decided by
// the wallet's fs cards with the verb of its access (fs_write asks
// fs:write): a card allowing only fs:read refuses fs_write, denied, naming
// the tool, the path and the reason, and the decision is kept for the
// record; FileAllow, the same question where the path led, refuses the
// same write.
func TestGateFileBuiltinHeldToFsCards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := gateConfig(t)
	g, _ := newGate(t)
	w := walletOf(t, "a", "fs:read /srv/**")

	c := &Call{Cfg: cfg, Agent: "a", ID: "sf", Tool: &config.Tool{Name: "fs_write"}, Files: true, Input: `{"path":"/srv/work/out.txt","content":"x"}`, Wallet: w}
	_, terr, err := g.Hold(ctx, c)
	if err != nil || terr == nil || terr.Kind != api.KindDenied || !strings.HasPrefix(terr.Message, "fs_write /srv/work/out.txt: ") ||
		len(c.FS) != 1 || c.FS[0].Allow || c.FS[0].API().Target != "fs:write /srv/work/out.txt" {
		t.Errorf("fs_write with only fs:read: refusal %+v, err %v, decisions %+v; want denied by fs:write /srv/work/out.txt", terr, err, c.FS)
	}
	c = &Call{Cfg: cfg, Agent: "a", ID: "sf", Tool: &config.Tool{Name: "fs_read"}, Files: true, Input: `{"path":"/srv/work/in.txt"}`, Wallet: w}
	if _, terr, err := g.Hold(ctx, c); terr != nil || err != nil || len(c.FS) != 1 || !c.FS[0].Allow || c.FS[0].API().Target != "fs:read /srv/work/in.txt" {
		t.Errorf("fs_read with fs:read: refusal %+v, err %v, decisions %+v; want it through, fs:read decided", terr, err, c.FS)
	}

	allow := FileAllow(w)
	if err := allow("/srv/work/out.txt", boundary.Write); err == nil || !strings.Contains(err.Error(), "fs:write") {
		t.Errorf("FileAllow write with only fs:read: %v; want a refusal naming fs:write", err)
	}
	if err := allow("/etc/passwd", boundary.Read); err == nil {
		t.Error("FileAllow read outside every card: allowed")
	}
	if err := allow("/srv/work/in.txt", boundary.Read); err != nil {
		t.Errorf("FileAllow read under fs:read /srv/**: %v", err)
	}
}

// TestGatePreopensHeldToCards: a WebAssembly tool's directories are the
// session's boundary held to the wallet's fs cards (read-only without
// fs:write), with the decisions kept; a tool whose kind takes no preopens
// gets none.
func TestGatePreopensHeldToCards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := gateConfig(t)
	g, _ := newGate(t)
	wasm := config.Tool{Name: "w", FS: config.FSWrite}
	c := &Call{Cfg: cfg, Agent: "a", ID: "sp", Tool: &wasm, Preopens: true, Wallet: walletOf(t, "a", "fs:read /srv/work/**")}
	dirs, terr, err := g.Hold(ctx, c)
	want := []sandbox.Preopen{{HostPath: "/srv/work", GuestPath: "/srv/work"}}
	if terr != nil || err != nil || len(dirs) != 1 || dirs[0] != want[0] || len(c.FS) != 3 {
		t.Errorf("preopens with fs:read /srv/work/** only: %+v (decisions %d), refusal %+v, err %v; want %+v read-only, 3 decisions", dirs, len(c.FS), terr, err, want)
	}
	c = &Call{Cfg: cfg, Agent: "a", ID: "sp", Tool: &wasm, Preopens: false}
	if dirs, terr, err := g.Hold(ctx, c); dirs != nil || terr != nil || err != nil {
		t.Errorf("a kind without preopens: %+v, %+v, %v; want nothing", dirs, terr, err)
	}
}

// TestGateRecheckReadsTheSessionAgain: the boundary is held again after
// the middleware's wait: a session reset to network off meanwhile refuses
// the call at Recheck, though Hold let it through and the gate's cache
// holds the session as it was.
func TestGateRecheckReadsTheSessionAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := gateConfig(t)
	g, st := newGate(t)
	c := &Call{Cfg: cfg, Agent: "b", ID: "sr", Tool: &config.Tool{Name: "fetcher", HTTPAllow: []string{"api.example.com"}}}
	if _, terr, err := g.Hold(ctx, c); terr != nil || err != nil || c.Sess == nil {
		t.Fatalf("Hold: %+v, %v, session %v", terr, err, c.Sess)
	}
	b := c.Sess.Boundary
	b.Network = false
	if _, err := st.ResetSession(ctx, "sr", b, "test"); err != nil {
		t.Fatal(err)
	}
	_, terr, err := g.Recheck(ctx, c)
	if err != nil || structuredReason(terr) != boundary.ReasonBoundaryRequired {
		t.Errorf("Recheck after the session's network was turned off: refusal %+v, err %v; want sandbox_boundary_required", terr, err)
	}
}

// TestGateCLIWritable: a wrapped CLI's write paths, for an agent with a
// declared boundary, are narrowed to what the session's boundary lets it
// write (the rest read-only where it may read) and held to the wallet's
// fs cards, the decisions kept by Hold for the record.
func TestGateCLIWritable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := gateConfig(t)
	g, _ := newGate(t)
	cli := config.Tool{Name: "git", CLI: &config.CLI{WritePaths: []string{"/srv/work", "/srv/docs", "/etc"}}}
	c := &Call{Cfg: cfg, Agent: "a", ID: "sc", Tool: &cli, Wallet: walletOf(t, "a", "fs:read /srv/**", "fs:write /srv/work/**")}
	if _, terr, err := g.Hold(ctx, c); terr != nil || err != nil || len(c.FS) != 3 {
		t.Fatalf("Hold: %+v, %v, decisions %+v; want 3 decisions (read and write /srv/work, read /srv/docs)", terr, err, c.FS)
	}
	writable, lost, _, terr, err := g.CLIWritable(ctx, c)
	if terr != nil || err != nil || strings.Join(writable, ",") != "/srv/work" || strings.Join(lost, ",") != "/srv/docs" {
		t.Errorf("CLIWritable: writable %v, read-only %v (%+v, %v); want /srv/work writable, /srv/docs read-only, /etc nothing", writable, lost, terr, err)
	}
	// Without fs:write in the cards, nothing stays writable.
	c = &Call{Cfg: cfg, Agent: "a", ID: "sc", Tool: &cli, Wallet: walletOf(t, "a", "fs:read /srv/**")}
	if writable, lost, _, _, _ := g.CLIWritable(ctx, c); len(writable) != 0 || strings.Join(lost, ",") != "/srv/work,/srv/docs" {
		t.Errorf("CLIWritable with fs:read only: writable %v, read-only %v; want none writable, /srv/work and /srv/docs read-only", writable, lost)
	}
}
