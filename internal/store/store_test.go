package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/pgtest"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("MAIDEN_STORE_TEST_CHILD"); mode != "" {
		os.Exit(runChild(mode))
	}
	// A PostgreSQL store's journal defaults to a directory under
	// $XDG_STATE_HOME: a temporary one for the tests (and their child
	// processes, which inherit it).
	state, err := os.MkdirTemp("", "maiden-store-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("XDG_STATE_HOME", state)
	code := pgtest.Run(m)
	os.RemoveAll(state)
	os.Exit(code)
}

// clock is a settable clock for expiry tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Now().UTC().Truncate(time.Second)} }

func open(t *testing.T, path string, c *clock) *DB {
	t.Helper()
	opts := &Options{}
	if c != nil {
		opts.Now = c.now
	}
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func spec(t testing.TB, grants ...string) cards.Spec {
	t.Helper()
	var s cards.Spec
	for _, g := range grants {
		list := &s.LowerPos
		switch {
		case strings.HasPrefix(g, "-"):
			list, g = &s.LowerNeg, g[1:]
		case strings.HasPrefix(g, "^"):
			list, g = &s.UpperPos, g[1:]
		case strings.HasPrefix(g, "!"):
			list, g = &s.UpperNeg, g[1:]
		}
		p, err := grant.Parse(g)
		if err != nil {
			t.Fatalf("Parse(%q): %v", g, err)
		}
		*list = append(*list, cards.Grant{Grant: p})
	}
	return s
}

// dump is every row of every table, to show that a failed operation wrote
// nothing.
func dump(t *testing.T, s *DB) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"agents", "tokens", "cards", "card_parents", "revocations", "counters", "schema_migrations", "audit", "rate_buckets", "quota_windows", "approvals"} {
		rows, err := s.db.Query("SELECT * FROM " + table + " ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %v\n", table, vals)
		}
		rows.Close()
	}
	return b.String()
}

func mustAgents(t *testing.T, s *DB, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := s.EnsureAgent(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	eachBackend(t, testMigrations)
}

func testMigrations(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s := open(t, path, nil)
	var v int
	if err := s.db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("version %d, %v; want %d", v, err, SchemaVersion())
	}
	if !be.pg {
		var mode string
		if err := s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
			t.Fatalf("journal_mode %q, %v; want wal", mode, err)
		}
	}
	mustAgents(t, s, "a")
	s.Close()

	// Reopening runs nothing again and keeps the data.
	s2 := open(t, path, nil)
	if as, err := s2.Agents(ctx); err != nil || len(as) != 1 {
		t.Fatalf("agents after reopen: %v, %v", as, err)
	}
	// A newer schema is refused, and the file is left as it is.
	if _, err := s2.db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)`); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	_, err := Open(ctx, path, nil)
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "version 99") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of a newer schema: %v", err)
	}
	if be.pg {
		if got := pgtest.Exec(t, path, `SELECT MAX(version) FROM schema_migrations`); strings.TrimSpace(got) != "99" {
			t.Fatalf("the newer database was changed: version %q", got)
		}
		return
	}
	db, _ := sql.Open("sqlite", path)
	defer db.Close()
	if err := db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil || v != 99 {
		t.Fatalf("the newer file was changed: version %d, %v", v, err)
	}
}

// stored is everything the store holds, as bytes to search for what must
// not be there: SQLite's file and WAL (checkpointed first), or every row
// of every table of the PostgreSQL database.
func stored(t *testing.T, s *DB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	if s.pg == nil {
		s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
		for _, f := range []string{s.path, s.path + "-wal"} {
			b, _ := os.ReadFile(f)
			out[f] = b
		}
		return out
	}
	rows, err := s.db.Query(`SELECT tablename FROM pg_tables WHERE schemaname = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) < 10 {
		t.Fatalf("only tables %v", tables)
	}
	for _, table := range tables {
		var b bytes.Buffer
		rows, err := s.db.Query("SELECT * FROM " + table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%v\n", vals)
		}
		rows.Close()
		out["table "+table] = b.Bytes()
	}
	return out
}

func TestOpenBadPath(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "a?b", filepath.Join(t.TempDir(), "missing-dir", "x", "state.db")} {
		if s, err := Open(context.Background(), p, nil); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	eachBackend(t, testTokens)
}

func testTokens(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s := open(t, path, nil)
	mustAgents(t, s, "research", "coder")
	tok, info, err := s.MintToken(ctx, "research")
	if err != nil {
		t.Fatal(err)
	}
	if info.Agent != "research" || !strings.HasPrefix(tok, "mdn_"+info.ID+"_") {
		t.Fatalf("token %q, info %+v", tok, info)
	}
	if a, err := s.Authenticate(ctx, tok); err != nil || a != "research" {
		t.Fatalf("Authenticate = %q, %v", a, err)
	}
	secret := tok[len("mdn_"+info.ID+"_"):]
	other, _, err := s.MintToken(ctx, "coder")
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"empty":             "",
		"no prefix":         strings.TrimPrefix(tok, "mdn_"),
		"wrong secret":      tok[:len(tok)-2] + "xx",
		"secret of another": "mdn_" + info.ID + "_" + other[len(other)-len(secret):],
		"unknown id":        "mdn_0000000000000000_" + secret,
		"short id":          "mdn_00_" + secret,
		"no secret":         "mdn_" + info.ID + "_",
	} {
		if a, err := s.Authenticate(ctx, bad); !errors.Is(err, ErrBadToken) || a != "" {
			t.Errorf("%s: Authenticate(%q) = %q, %v; want ErrBadToken", name, bad, a, err)
		}
	}
	if _, _, err := s.MintToken(ctx, "nobody"); !errors.Is(err, ErrUnknownAgent) {
		t.Fatalf("token for an unknown agent: %v", err)
	}
	// Only a hash is stored: the secret is nowhere in the files.
	sawID := false
	for f, b := range stored(t, s) {
		sawID = sawID || bytes.Contains(b, []byte(info.ID))
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("%s holds the token's secret", f)
		}
	}
	if !sawID {
		t.Fatalf("the token's ID is not in what the store holds either: the search proves nothing")
	}
	// Revocation stops it at once.
	if err := s.RevokeToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, tok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("revoked token: %v", err)
	}
	if err := s.RevokeToken(ctx, "nope"); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("revoking an unknown token: %v", err)
	}
	ts, err := s.Tokens(ctx, "research")
	if err != nil || len(ts) != 1 || ts[0].Revoked.IsZero() {
		t.Fatalf("Tokens = %+v, %v", ts, err)
	}
}

// TestCardErrorsWriteNothing: every refused card operation is a clear error
// and leaves the store exactly as it was (CARDS.md A5, A6, A7, A9 through
// the store).
func TestCardErrorsWriteNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, testCardErrorsWriteNothing)
}

func testCardErrorsWriteNothing(t *testing.T, be backend) {
	ctx := context.Background()
	clk := newClock()
	s := open(t, be.target(t), clk)
	mustAgents(t, s, "parent", "sub")
	p, err := s.Grant(ctx, "parent", spec(t, "fs:read /data/**", "-fs:read /data/s/**", "card:* *"))
	if err != nil {
		t.Fatal(err)
	}
	capped, err := s.Grant(ctx, "parent", spec(t, "tool:invoke * --...", "^tool:invoke search --..."))
	if err != nil {
		t.Fatal(err)
	}
	expiring := spec(t, "tool:invoke x")
	expiring.Expires = clk.now().Add(time.Hour)
	exp, err := s.Grant(ctx, "parent", expiring)
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := s.Grant(ctx, "parent", spec(t, "tool:invoke y"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, Operator(), revoked.ID); err != nil {
		t.Fatal(err)
	}
	twoDays := spec(t, "tool:invoke x")
	twoDays.Expires = clk.now().Add(48 * time.Hour)
	past := spec(t, "tool:invoke x")
	past.Expires = clk.now().Add(-time.Second)
	parentAct := AgentActor("parent")
	for _, tc := range []struct {
		name string
		op   func() error
		want error
		says string
	}{
		{"A5 derive lower-bound-too-broad", func() error {
			_, err := s.Derive(ctx, Operator(), p.ID, "sub", spec(t, "fs:read /other/f", "-fs:read /data/s/**"))
			return err
		}, cards.ErrLowerBoundTooBroad, "/other/f"},
		{"derive dropping a negative", func() error {
			_, err := s.Derive(ctx, Operator(), p.ID, "sub", spec(t, "fs:read /data/a"))
			return err
		}, cards.ErrLowerBoundTooBroad, "/data/s/**"},
		{"A6 derive upper-bound-too-broad", func() error {
			_, err := s.Derive(ctx, Operator(), capped.ID, "sub", spec(t, "tool:invoke search"))
			return err
		}, cards.ErrUpperBoundTooBroad, capped.ID},
		{"A7 derive outliving the parent", func() error {
			_, err := s.Derive(ctx, Operator(), exp.ID, "sub", twoDays)
			return err
		}, cards.ErrCardExpired, exp.ID},
		{"A7 derive without expiry from an expiring parent", func() error {
			_, err := s.Derive(ctx, Operator(), exp.ID, "sub", spec(t, "tool:invoke x"))
			return err
		}, cards.ErrCardExpired, exp.ID},
		{"derive from a revoked card", func() error {
			_, err := s.Derive(ctx, Operator(), revoked.ID, "sub", spec(t, "tool:invoke y"))
			return err
		}, cards.ErrCardRevoked, revoked.ID},
		{"derive from an unknown card", func() error {
			_, err := s.Derive(ctx, Operator(), "card_nope", "sub", spec(t, "tool:invoke y"))
			return err
		}, ErrUnknownCard, "card_nope"},
		{"derive to an unknown agent", func() error {
			_, err := s.Derive(ctx, Operator(), p.ID, "ghost", spec(t, "fs:read /data/a", "-fs:read /data/s/**"))
			return err
		}, ErrUnknownAgent, "ghost"},
		{"A9 install of negatives only", func() error {
			_, err := s.Grant(ctx, "sub", spec(t, "-tool:invoke x"))
			return err
		}, cards.ErrInstallRecipientMismatch, "sub"},
		{"grant to an unknown agent", func() error {
			_, err := s.Grant(ctx, "ghost", spec(t, "tool:invoke x"))
			return err
		}, ErrUnknownAgent, "ghost"},
		{"grant already expired", func() error {
			_, err := s.Grant(ctx, "sub", past)
			return err
		}, cards.ErrCardExpired, "not in the future"},
		{"transfer to an unknown agent", func() error {
			return s.Transfer(ctx, Operator(), p.ID, "ghost")
		}, ErrUnknownAgent, "ghost"},
		{"transfer a revoked card", func() error {
			return s.Transfer(ctx, Operator(), revoked.ID, "sub")
		}, cards.ErrCardRevoked, revoked.ID},
		{"transfer an unknown card", func() error {
			return s.Transfer(ctx, Operator(), "card_nope", "sub")
		}, ErrUnknownCard, "card_nope"},
		{"revoke an unknown card", func() error {
			_, err := s.Revoke(ctx, Operator(), "card_nope")
			return err
		}, ErrUnknownCard, "card_nope"},
		{"revoke a revoked card", func() error {
			_, err := s.Revoke(ctx, Operator(), revoked.ID)
			return err
		}, cards.ErrCardRevoked, revoked.ID},
		{"agent derives from a card it does not hold", func() error {
			_, err := s.Derive(ctx, AgentActor("sub"), p.ID, "sub", spec(t, "fs:read /data/a", "-fs:read /data/s/**"))
			return err
		}, ErrNotAllowed, "does not hold"},
		{"a ceiling spans the wallet, card operations included", func() error {
			// parent holds card:* * in p, but its card capped limits the
			// whole wallet to tool:invoke search.
			_, err := s.Derive(ctx, parentAct, capped.ID, "sub", spec(t, "tool:invoke search", "^tool:invoke search"))
			return err
		}, ErrNotAllowed, "caps its wallet"},
		{"the zero actor may do nothing", func() error {
			_, err := s.Revoke(ctx, Actor{}, p.ID)
			return err
		}, ErrNotAllowed, "no actor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dump(t, s)
			err := tc.op()
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v; want %v naming %q", err, tc.want, tc.says)
			}
			if diff := cmp.Diff(before, dump(t, s)); diff != "" {
				t.Fatalf("a refused operation changed the store (-before +after):\n%s", diff)
			}
		})
	}
}

// TestAgentCardOperations: a parent agent hands a sub-agent a narrower
// card and takes it back; what it may not do, it cannot. Placing a card in
// a wallet (derive for an agent, transfer) needs card:install for that
// wallet (CARDS.md, Install): without it an agent holding card:derive
// could put a prohibition in any agent's wallet and deny its calls.
func TestAgentCardOperations(t *testing.T) {
	t.Parallel()
	eachBackend(t, testAgentCardOperations)
}

func testAgentCardOperations(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	mustAgents(t, s, "lead", "sub", "other")
	root, err := s.Grant(ctx, "lead", spec(t, "tool:invoke search --...", "card:derive *", "card:revoke *"))
	if err != nil {
		t.Fatal(err)
	}
	lead := AgentActor("lead")
	if _, err := s.Derive(ctx, lead, root.ID, "sub", spec(t, "tool:invoke search --q=cart*")); !errors.Is(err, ErrNotAllowed) ||
		!strings.Contains(err.Error(), "card:install sub") {
		t.Fatalf("derive for sub without card:install sub: %v, want refused naming card:install sub", err)
	}
	if w, err := s.Wallet(ctx, "sub", time.Now()); err != nil || len(w.Cards()) != 0 {
		t.Fatalf("sub's wallet after the refused derive: %v, %v", w, err)
	}
	if _, err := s.Grant(ctx, "lead", spec(t, "card:install sub")); err != nil {
		t.Fatal(err)
	}
	child, err := s.Derive(ctx, lead, root.ID, "sub", spec(t, "tool:invoke search --q=cart*"))
	if err != nil {
		t.Fatal(err)
	}
	if child.Manager != "lead" || child.Holder != "sub" || !cmp.Equal(child.Parents, []string{root.ID}) {
		t.Fatalf("child %+v", child)
	}
	target := func(in string) grant.Target {
		args, err := grant.Render([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		return grant.ToolTarget("search", args)
	}
	w, err := s.Wallet(ctx, "sub", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !w.Decide(target(`{"q":"cartwheel"}`)).Allow || w.Decide(target(`{"q":"x"}`)).Allow {
		t.Fatal("the sub-agent's wallet does not decide as its card says")
	}
	// Another agent with card:derive on a card of its own, but no
	// card:install sub, cannot put a prohibition in sub's wallet.
	own, err := s.Grant(ctx, "other", spec(t, "tool:invoke search --...", "card:derive *"))
	if err != nil {
		t.Fatal(err)
	}
	ban := spec(t, "!tool:invoke search --...") // a prohibition: upper-negative only
	if _, err := s.Derive(ctx, AgentActor("other"), own.ID, "sub", ban); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "card:install sub") {
		t.Fatalf("other derives a prohibition for sub: %v, want refused naming card:install sub", err)
	}
	if w, err := s.Wallet(ctx, "sub", time.Now()); err != nil || !w.Decide(target(`{"q":"cartwheel"}`)).Allow {
		t.Fatalf("sub's wallet after the refused prohibition: %v", err)
	}
	// The sub-agent holds no card:derive, card:transfer or card:revoke.
	if _, err := s.Derive(ctx, AgentActor("sub"), child.ID, "other", spec(t, "tool:invoke search --q=cart")); !errors.Is(err, ErrNotAllowed) ||
		!strings.Contains(err.Error(), "card:derive") {
		t.Fatalf("sub derives: %v", err)
	}
	if err := s.Transfer(ctx, AgentActor("sub"), child.ID, "other"); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("sub transfers: %v", err)
	}
	if _, err := s.Revoke(ctx, AgentActor("other"), child.ID); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("an unrelated agent revokes: %v", err)
	}
	// The lead takes it back (it holds the parent and card:revoke).
	if n, err := s.Revoke(ctx, lead, child.ID); err != nil || n != 1 {
		t.Fatalf("lead revokes the child: %d, %v", n, err)
	}
	// An agent outside the card's lineage learns nothing of its state: the
	// same refusal now that it is revoked.
	if _, err := s.Revoke(ctx, AgentActor("other"), child.ID); !errors.Is(err, ErrNotAllowed) || errors.Is(err, cards.ErrCardRevoked) {
		t.Fatalf("an unrelated agent revokes a revoked card: %v", err)
	}
	w2, err := s.Wallet(ctx, "sub", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if w2.Decide(target(`{"q":"cartwheel"}`)).Allow {
		t.Fatal("a revoked card still allows")
	}
	// The wallet pinned before the revocation still decides as it was.
	if !w.Decide(target(`{"q":"cartwheel"}`)).Allow {
		t.Fatal("a pinned wallet changed under its call")
	}
	// Transfer with card:transfer, and card:install for each wallet the
	// card goes to (the lead's own too).
	if _, err := s.Grant(ctx, "lead", spec(t, "card:transfer *", "card:install lead")); err != nil {
		t.Fatal(err)
	}
	c2, err := s.Derive(ctx, lead, root.ID, "lead", spec(t, "tool:invoke search --q=a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Transfer(ctx, lead, c2.ID, "other"); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "card:install other") {
		t.Fatalf("transfer to other without card:install other: %v", err)
	}
	if got, _ := s.Card(ctx, c2.ID); got.Holder != "lead" {
		t.Fatalf("holder after a refused transfer: %q", got.Holder)
	}
	if _, err := s.Grant(ctx, "lead", spec(t, "card:install other")); err != nil {
		t.Fatal(err)
	}
	if err := s.Transfer(ctx, lead, c2.ID, "other"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Card(ctx, c2.ID); got.Holder != "other" {
		t.Fatalf("holder after transfer: %q", got.Holder)
	}
	// A recipient-bound card cannot go to another agent.
	bound := spec(t, "tool:invoke search --q=b")
	bound.LowerPos[0].Recipient = "lead"
	c3, err := s.Derive(ctx, lead, root.ID, "lead", bound)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Transfer(ctx, lead, c3.ID, "other"); !errors.Is(err, cards.ErrInstallRecipientMismatch) {
		t.Fatalf("transfer of a card bound to lead: %v", err)
	}
}

// TestRevokeA8 is CARDS.md A8 in the store: a chain A→B→C, revoke A: 3
// revoked; revoke A again: card-revoked.
func TestRevokeA8(t *testing.T) {
	t.Parallel()
	eachBackend(t, testRevokeA8)
}

func testRevokeA8(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	mustAgents(t, s, "x")
	a, err := s.Grant(ctx, "x", spec(t, "tool:invoke t --..."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Derive(ctx, Operator(), a.ID, "x", spec(t, "tool:invoke t --p=*"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Derive(ctx, Operator(), b.ID, "x", spec(t, "tool:invoke t --p=1")); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Revoke(ctx, Operator(), a.ID); err != nil || n != 3 {
		t.Fatalf("revoke A: %d, %v; want 3", n, err)
	}
	if _, err := s.Revoke(ctx, Operator(), a.ID); !errors.Is(err, cards.ErrCardRevoked) {
		t.Fatalf("revoke A again: %v; want card-revoked", err)
	}
	w, _ := s.Wallet(ctx, "x", time.Now())
	if len(w.Cards()) != 0 {
		t.Fatalf("wallet after the cascade: %v", w.Cards())
	}
}

func TestSystemCards(t *testing.T) {
	t.Parallel()
	eachBackend(t, testSystemCards)
}

func testSystemCards(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	mustAgents(t, s, "a", "b")
	specs := []cards.Spec{spec(t, "tool:invoke echo --...", "card:* *"), spec(t, "network:connect api.example.com")}
	if added, revoked, err := s.SyncSystemCards(ctx, "a", specs); err != nil || added != 2 || revoked != 0 {
		t.Fatalf("first sync: %d %d %v", added, revoked, err)
	}
	if added, revoked, err := s.SyncSystemCards(ctx, "a", specs); err != nil || added != 0 || revoked != 0 {
		t.Fatalf("same sync again: %d %d %v", added, revoked, err)
	}
	cs, _ := s.Cards(ctx, "a")
	if len(cs) != 2 || !cs[0].System || cs[0].Manager != "system" {
		t.Fatalf("system cards: %+v", cs)
	}
	if cs[0].LowerPos[0].Grant.Class != grant.Tool {
		cs[0], cs[1] = cs[1], cs[0]
	}
	// Agents cannot revoke or transfer them, even holding card:* *.
	if _, err := s.Revoke(ctx, AgentActor("a"), cs[0].ID); !errors.Is(err, cards.ErrSystemCard) {
		t.Fatalf("agent revokes a system card: %v", err)
	}
	if err := s.Transfer(ctx, AgentActor("a"), cs[0].ID, "b"); !errors.Is(err, cards.ErrSystemCard) {
		t.Fatalf("agent transfers a system card: %v", err)
	}
	// But may derive from them; dropping the grant from the configuration
	// revokes the system card and what was derived from it.
	d, err := s.Derive(ctx, AgentActor("a"), cs[0].ID, "b", spec(t, "tool:invoke echo --msg=hi"))
	if err != nil {
		t.Fatal(err)
	}
	if added, revoked, err := s.SyncSystemCards(ctx, "a", specs[1:]); err != nil || added != 0 || revoked != 2 {
		t.Fatalf("sync without the first: %d %d %v", added, revoked, err)
	}
	if got, _ := s.Card(ctx, d.ID); got.Revoked.IsZero() {
		t.Fatal("the derived card outlived its system parent")
	}
	if _, _, err := s.SyncSystemCards(ctx, "a", []cards.Spec{spec(t, "-tool:invoke x")}); !errors.Is(err, cards.ErrInstallRecipientMismatch) {
		t.Fatalf("a negative-only system card: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	eachBackend(t, testExpiry)
}

func testExpiry(t *testing.T, be backend) {
	ctx := context.Background()
	clk := newClock()
	s := open(t, be.target(t), clk)
	mustAgents(t, s, "a")
	sp := spec(t, "tool:invoke t")
	sp.Expires = clk.now().Add(time.Hour)
	c, err := s.Grant(ctx, "a", sp)
	if err != nil {
		t.Fatal(err)
	}
	tt := grant.ToolTarget("t", nil)
	if w, _ := s.Wallet(ctx, "a", clk.now()); !w.Decide(tt).Allow {
		t.Fatal("denied before expiry")
	}
	clk.add(time.Hour)
	if w, _ := s.Wallet(ctx, "a", clk.now()); w.Decide(tt).Allow {
		t.Fatal("allowed at expiry")
	}
	if _, err := s.Derive(ctx, Operator(), c.ID, "a", sp); !errors.Is(err, cards.ErrCardExpired) {
		t.Fatalf("derive from an expired card: %v", err)
	}
	if err := s.Transfer(ctx, Operator(), c.ID, "a"); !errors.Is(err, cards.ErrCardExpired) {
		t.Fatalf("transfer an expired card: %v", err)
	}
}

// TestGenerationAdvances: every committed change moves the counter, a
// refused one does not.
func TestGenerationAdvances(t *testing.T) {
	t.Parallel()
	eachBackend(t, testGenerationAdvances)
}

func testGenerationAdvances(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	g0, _ := s.Generation(ctx)
	mustAgents(t, s, "a")
	g1, _ := s.Generation(ctx)
	s.Grant(ctx, "ghost", spec(t, "tool:invoke t"))
	g2, _ := s.Generation(ctx)
	if g1 == g0 || g2 != g1 {
		t.Fatalf("generations %d %d %d", g0, g1, g2)
	}
}

// TestRevokeCascadeRandomTrees builds random trees of derived cards in a
// real store, revokes a few random subtrees (so that some descendants are
// revoked already), then a random card, and checks the count and the set
// against the tree.
func TestRevokeCascadeRandomTrees(t *testing.T) {
	t.Parallel()
	eachBackend(t, testRevokeCascadeRandomTrees)
}

func testRevokeCascadeRandomTrees(t *testing.T, be backend) {
	ctx := context.Background()
	s := open(t, be.target(t), nil)
	mustAgents(t, s, "x")
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 8 {
		root, err := s.Grant(ctx, "x", spec(t, "tool:invoke t --..."))
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{root.ID}
		parent := map[string]string{}
		for range 1 + rng.IntN(25) {
			p := ids[rng.IntN(len(ids))]
			c, err := s.Derive(ctx, Operator(), p, "x", spec(t, "tool:invoke t --..."))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, c.ID)
			parent[c.ID] = p
		}
		under := func(id, anc string) bool {
			for ; id != ""; id = parent[id] {
				if id == anc {
					return true
				}
			}
			return false
		}
		revoked := map[string]bool{}
		for _, pre := range []string{ids[rng.IntN(len(ids))], ids[rng.IntN(len(ids))]} {
			if revoked[pre] {
				continue
			}
			if _, err := s.Revoke(ctx, Operator(), pre); err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				if under(id, pre) {
					revoked[id] = true
				}
			}
		}
		target := ids[rng.IntN(len(ids))]
		n, err := s.Revoke(ctx, Operator(), target)
		if revoked[target] {
			if !errors.Is(err, cards.ErrCardRevoked) {
				t.Fatalf("round %d: revoking a revoked card: %v", round, err)
			}
			continue
		}
		want := 0
		for _, id := range ids {
			if under(id, target) && !revoked[id] {
				want++
				revoked[id] = true
			}
		}
		if err != nil || n != want {
			t.Fatalf("round %d: Revoke = %d, %v; want %d", round, n, err, want)
		}
		for _, id := range ids {
			c, err := s.Card(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if revoked[id] == c.Revoked.IsZero() {
				t.Fatalf("round %d: card %s revoked=%v, want %v", round, id, !c.Revoked.IsZero(), revoked[id])
			}
		}
	}
}
