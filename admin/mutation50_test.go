package admin

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/statetest"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the fiftieth mutation pass's (docs/security-tests.md,
// "Fiftieth pass"): the operator's API and the agent's card operations
// through it.

// state50 is a State over a new SQLite store under the configuration src
// (agent.toml's text), its agents synced, and the store's path.
func state50(t *testing.T, src string) (*State, string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.db")
	s, err := Open(context.Background(), cfg, &Options{State: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// grant50 installs a card of one grant text in agent's wallet, as the
// operator, and returns its ID.
func grant50(t *testing.T, s *State, agent, text string) string {
	t.Helper()
	c, err := s.Grant(context.Background(), agent, CardSpec{Allow: []string{text}})
	if err != nil {
		t.Fatalf("grant %s to %s: %v", text, agent, err)
	}
	return c.ID
}

// TestMutation50AgentReachesOnlyItsOwnCards: acting as an agent (the
// cards_* built-ins), a card another agent holds is answered exactly like
// one that does not exist (not-allowed, never unknown-card), for showing,
// deriving, transferring and revoking, even holding card:derive,
// card:transfer and card:revoke on every card; a card goes only to an
// agent agent.toml declares; an agent lists only its own cards, and of
// them only those a card:inspect grant names (CARDS.md, Shapes: card
// verbs; Derivation; Install).
func TestMutation50AgentReachesOnlyItsOwnCards(t *testing.T) {
	ctx := context.Background()
	s, _ := state50(t, "version = 1\n[agents.lead]\n[agents.sub]\n[agents.spy]\n")
	if err := s.st.EnsureAgent(ctx, "stranger"); err != nil { // in the store, not in agent.toml
		t.Fatal(err)
	}
	for _, g := range []string{"card:derive *", "card:transfer *", "card:revoke *", "card:install sub", "card:install stranger", "card:install lead"} {
		grant50(t, s, "lead", g)
	}
	weather := grant50(t, s, "lead", "tool:invoke weather --...")
	mail := grant50(t, s, "lead", "tool:invoke mail --...")
	grant50(t, s, "lead", "card:inspect "+weather)
	subs := grant50(t, s, "sub", "tool:invoke other --...")
	grant50(t, s, "spy", "card:inspect *")
	lead := s.As("lead")

	notHeld := func(what string, err error, id string) {
		t.Helper()
		if !errors.Is(err, ErrNotAllowed) || errors.Is(err, ErrUnknownCard) || !strings.Contains(err.Error(), `agent "lead" holds no card "`+id+`"`) {
			t.Errorf("%s: %v; want not-allowed: agent \"lead\" holds no card %q (another agent's card answered as one that does not exist)", what, err, id)
		}
	}
	for _, id := range []string{subs, "card_nope"} {
		_, err := lead.Card(ctx, id)
		notHeld("lead shows card "+id, err, id)
		_, err = lead.Derive(ctx, id, "lead", []string{"tool:invoke other --x=1"}, time.Time{}, "")
		notHeld("lead derives from card "+id, err, id)
		notHeld("lead transfers card "+id, lead.Transfer(ctx, id, "lead"), id)
	}
	if n, err := lead.Revoke(ctx, "card_nope"); n != 0 || !errors.Is(err, ErrNotAllowed) || errors.Is(err, ErrUnknownCard) {
		t.Errorf("lead revokes a card that does not exist: %d, %v; want not-allowed, as for a card outside its lineage", n, err)
	}
	if c, err := s.Card(ctx, subs); err != nil || !c.Revoked.IsZero() || c.Holder != "sub" {
		t.Errorf("sub's card after lead's attempts: %+v, %v; want live, held by sub", c, err)
	}

	// A recipient the configuration does not declare (but the store
	// holds) gets nothing.
	if _, err := lead.Derive(ctx, weather, "stranger", []string{"tool:invoke weather --city=Paris"}, time.Time{}, ""); !errors.Is(err, ErrUnknownAgent) {
		t.Errorf("lead derives for an agent agent.toml does not declare: %v; want unknown-agent", err)
	}
	if err := lead.Transfer(ctx, mail, "stranger"); !errors.Is(err, ErrUnknownAgent) {
		t.Errorf("lead transfers to an agent agent.toml does not declare: %v; want unknown-agent", err)
	}
	if cs, err := s.Cards(ctx, "stranger"); err != nil || len(cs) != 0 {
		t.Errorf("stranger's cards after the refusals: %d, %v; want none", len(cs), err)
	}

	// Listing: its own cards only, those card:inspect names only.
	if _, err := lead.Cards(ctx, "sub"); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("lead lists sub's cards: %v; want not-allowed", err)
	}
	ids := func(agent string) []string {
		t.Helper()
		cs, err := s.As(agent).Cards(ctx, "")
		if err != nil {
			t.Fatalf("%s lists its cards: %v", agent, err)
		}
		var out []string
		for _, c := range cs {
			if c.Holder != agent {
				t.Errorf("%s's list holds card %s of %s; want only its own", agent, c.ID, c.Holder)
			}
			out = append(out, c.ID)
		}
		return out
	}
	if got := ids("lead"); !slices.Equal(got, []string{weather}) {
		t.Errorf("lead (card:inspect %s only) lists %v; want only [%s]", weather, got, weather)
	}
	if got := ids("spy"); len(got) != 1 {
		t.Errorf("spy (card:inspect *) lists %v; want only its own inspect card", got)
	}
	if got := ids("sub"); len(got) != 0 {
		t.Errorf("sub (no card:inspect) lists %v; want none", got)
	}
}

// TestMutation50PinnedWalletDecides: the cards_* built-ins act on the
// wallet the call pinned when it started (CARDS.md, Decision): a
// card:inspect card granted after the pin shows nothing to that call.
func TestMutation50PinnedWalletDecides(t *testing.T) {
	ctx := context.Background()
	s, _ := state50(t, "version = 1\n[agents.lead]\n")
	weather := grant50(t, s, "lead", "tool:invoke weather --...")
	w, err := s.st.Wallet(ctx, "lead", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	grant50(t, s, "lead", "card:inspect "+weather) // after the call pinned its wallet
	as := adminlink.As(s.st, s.cfg, w).(*AgentState)
	if cs, err := as.Cards(ctx, ""); err != nil || len(cs) != 0 {
		t.Errorf("a call pinned before the card:inspect card lists %d cards, %v; want none (its wallet holds no card:inspect)", len(cs), err)
	}
	if cs, err := s.As("lead").Cards(ctx, ""); err != nil || len(cs) != 1 || cs[0].ID != weather {
		t.Errorf("lead without a pinned wallet lists %+v, %v; want [%s]", cs, err, weather)
	}
}

// TestMutation50GrantKeepsTheWholeSpec: the operator's card is the spec
// whole (its ceiling, prohibition, expiry and budget), and a malformed
// grant among good ones is refused with nothing written.
func TestMutation50GrantKeepsTheWholeSpec(t *testing.T) {
	ctx := context.Background()
	s, _ := state50(t, "version = 1\n[agents.a]\n")
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	c, err := s.Grant(ctx, "a", CardSpec{Allow: []string{"tool:invoke weather --..."}, Forbid: []string{"tool:invoke weather --city=Paris"},
		Expires: exp, Budget: "calls=3"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Card(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.UpperNeg) != 1 || !got.Expires.Equal(exp) || len(got.Budgets) != 1 || got.Budgets[0].Key != "calls" || got.Budgets[0].Limit != 3 {
		t.Errorf("the granted card: forbid %+v, expires %v, budgets %+v; want the prohibition, %v and calls=3", got.UpperNeg, got.Expires, got.Budgets, exp)
	}
	ceil, err := s.Grant(ctx, "a", CardSpec{Ceiling: []string{"tool:invoke weather --..."}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Card(ctx, ceil.ID); err != nil || len(got.UpperPos) != 1 {
		t.Errorf("the ceiling card: %+v, %v; want its ceiling", got, err)
	}
	before, _ := s.Cards(ctx, "a")
	for _, spec := range []CardSpec{
		{Allow: []string{"tool:invoke weather --...", "tool:invok mail"}},
		{Allow: []string{"tool:invoke weather --..."}, Forbid: []string{"nonsense"}},
		{Allow: []string{"tool:invoke weather --..."}, Ceiling: []string{"tool:"}},
	} {
		if _, err := s.Grant(ctx, "a", spec); !errors.Is(err, ErrBadGrant) {
			t.Errorf("grant %+v: %v; want a bad grant", spec, err)
		}
	}
	if after, _ := s.Cards(ctx, "a"); len(after) != len(before) {
		t.Errorf("cards after the malformed grants: %d, before %d; want nothing written", len(after), len(before))
	}
}

// TestMutation50SystemCardsKeepTheirBudget: a system card is its grant of
// agent.toml with the budget declared beside it (docs/cards.md,
// "Budgets").
func TestMutation50SystemCardsKeepTheirBudget(t *testing.T) {
	s, _ := state50(t, "version = 1\n[agents.a]\ngrants = [{ grant = \"tool:invoke weather --...\", budget = \"calls=7\" }]\n")
	cs, err := s.Cards(context.Background(), "a")
	if err != nil || len(cs) != 1 || !cs[0].System || len(cs[0].Budgets) != 1 || cs[0].Budgets[0].Limit != 7 {
		t.Fatalf("a's system cards: %+v, %v; want one with budget calls=7", cs, err)
	}
}

// approval50 is a State under a configuration whose approve rule
// middleware[1] may be approved always, and a pending request of agent
// research's call of echo --message=hi bound to a tool digest and policy
// (allowAlways as the rule said when it asked).
func approval50(t *testing.T, allowAlways bool) (*State, api.ApprovalRequest, store.Binding) {
	t.Helper()
	s, path := state50(t, "version = 1\n[agents.research]\n[[middleware]]\nuse = \"approve\"\nwhen = 'true'\n")
	bind := store.Binding{ToolDigest: strings.Repeat("cd", 32), Policy: `{"hosts":["api.example.com"]}`}
	req := statetest.Approval(t, path, statetest.Request{Agent: "research", Session: "s1", Tool: "echo", Rendered: "--message=hi",
		Digest: strings.Repeat("ab", 32), Rule: "middleware[1]", Reason: "asks a human", AllowAlways: allowAlways, ExpiresIn: time.Hour,
		ToolDigest: bind.ToolDigest, Policy: bind.Policy})
	return s, req, bind
}

// TestMutation50DecideAlwaysOnlyAsTheRuleAllows: "always" installs a card
// only when approving, only for a rule that allows it, only of an
// approve:always grant that covers the approved call (widened with a
// wildcard as editing is for), and bound to the tool and policy the human
// was shown; a denial records the operator by default and installs
// nothing.
func TestMutation50DecideAlwaysOnlyAsTheRuleAllows(t *testing.T) {
	ctx := context.Background()
	noCards := func(s *State, what string) {
		t.Helper()
		if cs, err := s.Cards(ctx, "research"); err != nil || len(cs) != 0 {
			t.Errorf("%s: research holds %d cards (%v); want none", what, len(cs), err)
		}
	}
	t.Run("rule never always", func(t *testing.T) {
		s, req, _ := approval50(t, false)
		if _, err := s.Decide(ctx, req.ID, Answer{Approve: true, Always: true}); !errors.Is(err, ErrAlwaysRefused) {
			t.Errorf("always for a rule with allow_always = false: %v; want ErrAlwaysRefused", err)
		}
		if cur, _ := s.Approval(ctx, req.ID); cur.State != store.ApprovalPending {
			t.Errorf("the request after the refusal is %s; want pending", cur.State)
		}
		noCards(s, "after always was refused")
	})
	t.Run("grants refused", func(t *testing.T) {
		s, req, _ := approval50(t, true)
		for _, g := range []string{"approve:always echo --message=bye", "tool:invoke echo --message=hi", "approve:always echo"} {
			if _, err := s.Decide(ctx, req.ID, Answer{Approve: true, Always: true, Grant: g}); !errors.Is(err, ErrAlwaysRefused) {
				t.Errorf("always with %q for echo --message=hi: %v; want ErrAlwaysRefused", g, err)
			}
		}
		noCards(s, "after the refused grants")
	})
	t.Run("denied always", func(t *testing.T) {
		s, req, _ := approval50(t, true)
		got, err := s.Decide(ctx, req.ID, Answer{Approve: false, Always: true, Reason: "no"})
		if err != nil || got.State != store.ApprovalDenied || got.DecidedBy != "operator" {
			t.Errorf("a denial with always set: %+v, %v; want denied by operator", got, err)
		}
		noCards(s, "after a denial with always set")
		recs, _ := s.AuditTail(ctx, 0, 0)
		if len(recs) == 0 || recs[len(recs)-1].Kind != AuditDenial || recs[len(recs)-1].Actor != "operator" {
			t.Errorf("the trail's last record: %+v; want a denial by operator", recs[len(recs)-1:])
		}
	})
	t.Run("widened and bound", func(t *testing.T) {
		s, req, bind := approval50(t, true)
		if _, err := s.Decide(ctx, req.ID, Answer{Approve: true, Always: true, Grant: " approve:always echo --message=* ", By: "cli:ann"}); err != nil {
			t.Fatalf("always with a widened grant: %v", err)
		}
		cs, err := s.Cards(ctx, "research")
		if err != nil || len(cs) != 1 || len(cs[0].LowerPos) != 1 || cs[0].Bound != bind.Key() {
			t.Fatalf("research's cards: %+v, %v; want one always-card bound to %s", cs, err, bind.Key())
		}
		if g := cs[0].LowerPos[0].Grant; g != "approve:always echo --message=*" {
			t.Errorf("the always-card's grant %q; want the edited one", g)
		}
	})
}

// TestMutation50BoundaryRequestsDecided: a boundary request is listed as
// pending with the calls, has no always, and a denial keeps the human's
// reason for the waiting call.
func TestMutation50BoundaryRequestsDecided(t *testing.T) {
	ctx := context.Background()
	s, path := state50(t, "version = 1\n[agents.research]\n")
	b := api.Boundary{Kind: api.BoundaryManaged, Filesystem: api.FSRestricted, Entries: []api.BoundaryEntry{}}
	h := statetest.BoundaryRequest(t, path, "research", "s1", b, "r1", `{"network":{"enabled":true}}`, "the task needs it", time.Now().Add(time.Hour))
	if p, err := s.Pending(ctx, time.Now()); err != nil || len(p) != 1 || p[0].ID != h || p[0].Kind != api.RequestBoundary {
		t.Errorf("Pending = %+v, %v; want the boundary request %s", p, err, h)
	}
	if _, err := s.Decide(ctx, h, Answer{Approve: true, Always: true}); !errors.Is(err, ErrAlwaysRefused) {
		t.Errorf("always for a boundary request: %v; want ErrAlwaysRefused", err)
	}
	got, err := s.Decide(ctx, h, Answer{Approve: false, Reason: "not today"})
	if err != nil || !strings.Contains(got.DecisionReason+got.Reason, "not today") {
		t.Errorf("a denied boundary request: %+v, %v; want the reason \"not today\" kept", got, err)
	}
	if _, err := s.Decide(ctx, h, Answer{Approve: true}); !errors.Is(err, ErrApprovalDecided) {
		t.Errorf("deciding it again: %v; want ErrApprovalDecided", err)
	}
}

// ocsf50 is OCSFEvent(r) decoded.
func ocsf50(t *testing.T, r api.AuditRecord) map[string]any {
	t.Helper()
	b, err := OCSFEvent(r)
	if err != nil {
		t.Fatalf("OCSFEvent(%s %s): %v", r.Kind, r.Body, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("OCSFEvent(%s %s) = %s: %v", r.Kind, r.Body, b, err)
	}
	return m
}

// path50 is the value at a dotted path of an OCSF event ("" when absent),
// formatted.
func path50(m map[string]any, p string) string {
	var v any = m
	for _, k := range strings.Split(p, ".") {
		o, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		if v, ok = o[k]; !ok {
			return ""
		}
	}
	return fmt.Sprint(v)
}

// TestMutation50OCSFSaysWhatHappened: a SIEM reading the OCSF export sees
// a human's denial, a fetch that failed after it was allowed and a fetch
// whose record says nothing of its decision as failures of low severity,
// a human's approval as a success, a revocation as Revoke Privileges of
// the agent whose card it was (not the operator who revoked it), a call
// from the agent (not its actor's text), and each event identified by its
// record's hash.
func TestMutation50OCSFSaysWhatHappened(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(kind, actor, agent, tool, body string) api.AuditRecord {
		return api.AuditRecord{Seq: 7, At: at, Kind: kind, Actor: actor, Agent: agent, Tool: tool, Body: json.RawMessage(body),
			Prev: strings.Repeat("1", 64), Hash: strings.Repeat("2", 64)}
	}
	for _, c := range []struct {
		name string
		r    api.AuditRecord
		want map[string]string
	}{
		{"a denial", rec(AuditDenial, "cli:ann", "a", "pay", `{"approval":"apr_1","reason":"no"}`),
			map[string]string{"status_id": "2", "severity_id": "2", "class_uid": "6003"}},
		{"an approval", rec(AuditApproval, "cli:ann", "a", "pay", `{"approval":"apr_1"}`),
			map[string]string{"status_id": "1", "severity_id": "1"}},
		{"a fetch allowed that failed", rec(AuditFetch, "agent:a", "a", "get", `{"method":"GET","host":"api.example.com","allowed":true,"error":"connection refused"}`),
			map[string]string{"status_id": "2", "status_detail": "connection refused", "severity_id": "2", "dst_endpoint.hostname": "api.example.com"}},
		{"a fetch saying nothing of its decision", rec(AuditFetch, "agent:a", "a", "get", `{"method":"GET","host":"api.example.com","status":200}`),
			map[string]string{"status_id": "2"}},
		{"a refused call", rec(AuditCallRefused, "agent:a", "a", "pay", `{"kind":"denied","message":"no card"}`),
			map[string]string{"status_id": "2", "severity_id": "2", "status_detail": "denied: no card", "src_endpoint.name": "a",
				"actor.user.name": "agent:a", "actor.user.type": "agent", "api.service.name": "pay"}},
		{"a revocation", rec(AuditCardChange, "operator", "a", "", `{"op":"revoke","card":"crd_1","revoked":1}`),
			map[string]string{"activity_id": "2", "activity_name": "Revoke Privileges", "type_uid": "300502", "user.name": "a", "class_uid": "3005"}},
		{"a token minted", rec(AuditTokenChange, "operator", "a", "", `{"op":"mint","token":"tok_1"}`),
			map[string]string{"activity_id": "1", "user.name": "a", "type_uid": "300501"}},
	} {
		m := ocsf50(t, c.r)
		for k, want := range c.want {
			if got := path50(m, k); got != want {
				t.Errorf("%s: %s = %q; want %q", c.name, k, got, want)
			}
		}
		if got := path50(m, "metadata.uid"); got != c.r.Hash {
			t.Errorf("%s: metadata.uid = %q; want the record's hash", c.name, got)
		}
		if got := path50(m, "unmapped.maiden_prev"); got != c.r.Prev {
			t.Errorf("%s: unmapped.maiden_prev = %q; want the record's prev (continuity)", c.name, got)
		}
	}
}

// TestMutation50ExportOfAgentText: a record whose body holds an agent's
// text with <, > and & (an argument) exports as JSON lines that verify:
// the body is written as the bytes that were hashed, not re-escaped.
func TestMutation50ExportOfAgentText(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	statetest.AppendAudit(t, path,
		api.AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "echo", Body: json.RawMessage(`{"rendered":"--message=<b>&amp;</b>"}`)},
		api.AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "echo", Body: json.RawMessage(`{"rendered":"--message=\u2028"}`)})
	s, err := OpenStore(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out bytes.Buffer
	h, err := s.ExportAuditStream(ctx, &out, ExportOptions{})
	if err != nil || h.Records != 2 {
		t.Fatalf("export: %+v, %v", h, err)
	}
	if n, head, err := VerifyExport(bytes.NewReader(out.Bytes()), ""); err != nil || n != 2 || head != h.Head {
		t.Errorf("VerifyExport of records holding <, > and &: %d, %s, %v; want 2 records, head %s", n, head, err, h.Head)
	}
}

// TestMutation50EmptyExportHeadIsGenesis: an export with no record (an
// empty trail, or resumed past its end) says the chain's genesis as its
// head, so a SIEM's check against the head it kept cannot pass on "".
func TestMutation50EmptyExportHeadIsGenesis(t *testing.T) {
	ctx := context.Background()
	s, err := OpenStore(ctx, filepath.Join(t.TempDir(), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out bytes.Buffer
	h, err := s.ExportAuditStream(ctx, &out, ExportOptions{})
	if err != nil || h.Records != 0 || h.Head != strings.Repeat("0", 64) {
		t.Errorf("export of an empty trail: %+v, %v; want no records and the genesis head", h, err)
	}
	if _, err := s.ExportAuditStream(ctx, &out, ExportOptions{From: -1}); err == nil {
		t.Error("export from -1 was accepted")
	}
}

// TestMutation50RefusedSortsTheCardRules: an agent acting without the
// card that allows it, and a derivation whose budget is more than its
// parent has, are refusals (Refused): the request was well formed and
// nothing was written, which the command line and the built-ins report
// as denied, not as a failure of the store.
func TestMutation50RefusedSortsTheCardRules(t *testing.T) {
	ctx := context.Background()
	s, _ := state50(t, "version = 1\n[agents.lead]\n[agents.sub]\n")
	weather := grant50(t, s, "lead", "tool:invoke weather --...")
	_, err := s.As("lead").Derive(ctx, weather, "sub", []string{"tool:invoke weather --city=Paris"}, time.Time{}, "")
	if !errors.Is(err, ErrNotAllowed) || !Refused(err) {
		t.Errorf("lead derives without card:derive: %v, Refused %v; want not-allowed, a refusal", err, Refused(err))
	}
	metered, err := s.Grant(ctx, "lead", CardSpec{Allow: []string{"tool:invoke metered --..."}, Budget: "calls=2"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Derive(ctx, metered.ID, "sub", []string{"tool:invoke metered --..."}, time.Time{}, "calls=3")
	if !errors.Is(err, ErrBudgetTooBroad) || !Refused(err) {
		t.Errorf("a child of calls=3 under calls=2: %v, Refused %v; want budget-too-broad, a refusal", err, Refused(err))
	}
	if Refused(ErrUnknownAgent) || Refused(ErrBadInput) {
		t.Error("an unknown agent or bad input counted as a refusal of the card rules")
	}
}

// TestMutation50DeriveKeepsTheEarlierExpiry: a child derived with an
// expiry earlier than its parent's (here: a parent that never expires)
// expires then (CARDS.md, Derivation; State.Derive).
func TestMutation50DeriveKeepsTheEarlierExpiry(t *testing.T) {
	ctx := context.Background()
	s, _ := state50(t, "version = 1\n[agents.lead]\n[agents.sub]\n")
	weather := grant50(t, s, "lead", "tool:invoke weather --...")
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	c, err := s.Derive(ctx, weather, "sub", []string{"tool:invoke weather --city=Paris"}, exp, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Card(ctx, c.ID); err != nil || !got.Expires.Equal(exp) {
		t.Errorf("the child's expiry: %v, %v; want %v (it was asked to expire then)", got.Expires, err, exp)
	}
}

// TestMutation50CloseLeavesAHostsStore: a State over a Host's store (the
// inbox, the cards_* built-ins) does not close that store when closed.
func TestMutation50CloseLeavesAHostsStore(t *testing.T) {
	ctx := context.Background()
	s, _ := state50(t, "version = 1\n[agents.a]\n")
	over := adminlink.Over(s.st, s.cfg).(*State)
	if err := over.Close(); err != nil {
		t.Fatal(err)
	}
	if as, err := s.Agents(ctx); err != nil || len(as) != 1 {
		t.Errorf("the Host's store after a State over it was closed: %+v, %v; want it still open", as, err)
	}
}

// TestMutation50TokensOfOneAgent: an agent's tokens are its own only.
func TestMutation50TokensOfOneAgent(t *testing.T) {
	ctx := context.Background()
	s, _ := state50(t, "version = 1\n[agents.a]\n[agents.b]\n")
	_, ta, err := s.MintToken(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.MintToken(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if toks, err := s.Tokens(ctx, "a"); err != nil || len(toks) != 1 || toks[0].ID != ta.ID {
		t.Errorf("Tokens(a) = %+v, %v; want a's one token %s", toks, err, ta.ID)
	}
}

// TestMutation50VerifyWholeFindsAnEarlierEdit: VerifyAuditFrom with whole
// set checks every record, so a record edited before the mark (by
// whoever can write the table) is found; without it, only what follows
// the mark and the mark's own record are.
func TestMutation50VerifyWholeFindsAnEarlierEdit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	var recs []api.AuditRecord
	for i := range 4 {
		recs = append(recs, api.AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: fmt.Sprint("t", i), Body: json.RawMessage(`{"rendered":""}`)})
	}
	statetest.AppendAudit(t, path, recs...)
	s, err := OpenStore(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mark, err := s.VerifyAuditFrom(ctx, AuditMark{}, false)
	if err != nil || mark.Records != 4 {
		t.Fatalf("VerifyAuditFrom(zero) = %+v, %v", mark, err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE audit SET tool = 'forged' WHERE seq = 2`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyAuditFrom(ctx, mark, true); !errors.Is(err, ErrAuditBroken) {
		t.Errorf("VerifyAuditFrom(mark, whole) after record 2 was edited: %v; want ErrAuditBroken", err)
	}
}

// TestMutation50ExportFlushesTheJournal: records this process's journal
// holds are in the export that starts after they were appended, whatever
// the journal's ingestion interval.
func TestMutation50ExportFlushesTheJournal(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"), &store.Options{JournalInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Journal().Append(store.AuditRecord{At: time.Now(), Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "echo", Body: []byte(`{"rendered":""}`)}); err != nil {
		t.Fatal(err)
	}
	s := adminlink.Over(st, nil).(*State)
	var out bytes.Buffer
	if h, err := s.ExportAuditStream(ctx, &out, ExportOptions{}); err != nil || h.Records != 1 {
		t.Errorf("export after one journaled record: %+v, %v; want it exported", h, err)
	}
}

// appendingWriter appends records to the trail on its first write: an
// export that is writing while calls go on.
type appendingWriter struct {
	bytes.Buffer
	during func()
}

func (w *appendingWriter) Write(p []byte) (int, error) {
	if w.during != nil {
		w.during()
		w.during = nil
	}
	return w.Buffer.Write(p)
}

// TestMutation50ExportEndsAtTheLastRecordItSaw: records appended while an
// export runs are the next export's, even those read in the page that
// holds the last record there was when it started; the head line says
// that record.
func TestMutation50ExportEndsAtTheLastRecordItSaw(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	big := json.RawMessage(`{"rendered":"--message=` + strings.Repeat("x", 5000) + `"}`)
	var recs []api.AuditRecord
	for i := range 3 {
		recs = append(recs, api.AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: fmt.Sprint("t", i+1), Body: big})
	}
	statetest.AppendAudit(t, path, recs...)
	s, err := OpenStore(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := &appendingWriter{during: func() {
		for i := range 2 {
			if _, err := s.st.AppendAudit(ctx, store.AuditRecord{At: time.Now(), Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: fmt.Sprint("late", i), Body: []byte(`{"rendered":""}`)}); err != nil {
				t.Error(err)
			}
		}
	}}
	h, err := s.ExportAuditStream(ctx, w, ExportOptions{Page: 2})
	if err != nil || w.during != nil {
		t.Fatalf("export: %+v, %v (appended during it: %v)", h, err, w.during == nil)
	}
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	if h.Records != 3 || h.Last != 3 || len(lines) != 4 {
		t.Errorf("an export that began at record 3, while records 4 and 5 were appended: %d records, last %d, %d lines; want records 1..3 and the head line", h.Records, h.Last, len(lines))
	}
}
