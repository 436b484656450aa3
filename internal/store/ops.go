package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
)

// maxName bounds agent names and IDs read from callers.
const maxName = 128

func checkName(what, name string) error {
	if name == "" || len(name) > maxName || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fmt.Errorf("%w: %s %q: must be 1..%d printable characters", ErrBadInput, what, name, maxName)
	}
	return nil
}

// --- agents ----------------------------------------------------------------

// EnsureAgent adds agent name if missing.
func (s *DB) EnsureAgent(ctx context.Context, name string) error {
	if err := checkName("agent name", name); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO agents (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, s.now().UnixNano())
		return err
	})
}

// Agents lists the agents.
func (s *DB) Agents(ctx context.Context) ([]Agent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, created_at FROM agents ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Agent
	for rows.Next() {
		var a Agent
		var created int64
		if err := rows.Scan(&a.Name, &created); err != nil {
			return nil, err
		}
		a.Created = time.Unix(0, created).UTC()
		out = append(out, a)
	}
	return out, rows.Err()
}

func mustAgent(ctx context.Context, tx *sql.Tx, name string) error {
	var n string
	err := tx.QueryRowContext(ctx, `SELECT name FROM agents WHERE name = ?`, name).Scan(&n)
	if isNoRows(err) {
		return fmt.Errorf("%w %q", ErrUnknownAgent, name)
	}
	return err
}

// --- tokens ----------------------------------------------------------------

// A token is "mdn_" + ID (16 hex digits, stored in clear to find the row)
// + "_" + secret (32 random bytes, base64url). The store keeps SHA-256 of
// the secret: the secret is random, so a slow password hash would add
// nothing, and the comparison is constant-time.
const tokenPrefix = "mdn_"

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func secretHash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// MintToken makes a token for agent.
func (s *DB) MintToken(ctx context.Context, agent string) (string, TokenInfo, error) {
	id := randomHex(8)
	b := make([]byte, 32)
	rand.Read(b)
	secret := base64.RawURLEncoding.EncodeToString(b)
	info := TokenInfo{ID: id, Agent: agent, Created: s.now().UTC()}
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := mustAgent(ctx, tx, agent); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO tokens (id, agent, hash, created_at) VALUES (?, ?, ?, ?)`,
			id, agent, secretHash(secret), info.Created.UnixNano()); err != nil {
			return err
		}
		_, err := s.appendAudit(ctx, tx, AuditRecord{Kind: AuditTokenChange, Actor: "operator", Agent: agent,
			Body: auditBody(map[string]string{"op": "mint", "token": id})})
		return err
	})
	if err != nil {
		return "", TokenInfo{}, fmt.Errorf("mint token for agent %q: %w", agent, err)
	}
	return tokenPrefix + id + "_" + secret, info, nil
}

// TokenID is the ID part of an agent token (what Tokens lists and
// RevokeToken takes; not secret), or "" for a string not of a token's
// form. It checks nothing: call it on a token Authenticate accepted.
func TokenID(token string) string {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	id, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || len(id) != 16 || secret == "" {
		return ""
	}
	return id
}

// Authenticate checks a token.
func (s *DB) Authenticate(ctx context.Context, token string) (string, error) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	id, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || len(id) != 16 || secret == "" {
		return "", ErrBadToken
	}
	// A token's row is kept while CardsGeneration is unchanged (tokens
	// change only with it: RevokeToken is a write of kindCards), so that a
	// request of a known agent makes no round trip on PostgreSQL; the
	// secret is compared against the row's hash every time.
	gen, gerr := s.CardsGeneration(ctx)
	if gerr == nil {
		if t, ok := s.tokens.get(id, gen); ok {
			if subtle.ConstantTimeCompare([]byte(secretHash(secret)), []byte(t.hash)) != 1 || t.revoked {
				return "", ErrBadToken
			}
			return t.agent, nil
		}
	}
	var agent, hash string
	var revoked sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT agent, hash, revoked_at FROM tokens WHERE id = ?`, id).Scan(&agent, &hash, &revoked)
	if err == nil && gerr == nil {
		s.tokens.put(id, cachedToken{gen: gen, agent: agent, hash: hash, revoked: revoked.Valid})
	}
	if isNoRows(err) {
		// Spend the same work as a known ID before saying no.
		subtle.ConstantTimeCompare([]byte(secretHash(secret)), []byte(secretHash("")))
		return "", ErrBadToken
	}
	if err != nil {
		return "", fmt.Errorf("authenticate: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(secretHash(secret)), []byte(hash)) != 1 || revoked.Valid {
		return "", ErrBadToken
	}
	return agent, nil
}

// Tokens lists tokens.
func (s *DB) Tokens(ctx context.Context, agent string) ([]TokenInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, agent, created_at, revoked_at FROM tokens WHERE agent = ? OR ? = '' ORDER BY created_at, id`, agent, agent)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TokenInfo
	for rows.Next() {
		var t TokenInfo
		var created int64
		var revoked sql.NullInt64
		if err := rows.Scan(&t.ID, &t.Agent, &created, &revoked); err != nil {
			return nil, err
		}
		t.Created = time.Unix(0, created).UTC()
		if revoked.Valid {
			t.Revoked = time.Unix(0, revoked.Int64).UTC()
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken revokes a token; revoking a revoked token is not an error.
func (s *DB) RevokeToken(ctx context.Context, id string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		var revoked sql.NullInt64
		var agent string
		err := tx.QueryRowContext(ctx, `SELECT revoked_at, agent FROM tokens WHERE id = ?`, id).Scan(&revoked, &agent)
		if isNoRows(err) {
			return fmt.Errorf("revoke token: %w %q", ErrUnknownToken, id)
		}
		if err != nil || revoked.Valid {
			return err
		}
		if _, err = tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE id = ?`, s.now().UnixNano(), id); err != nil {
			return err
		}
		_, err = s.appendAudit(ctx, tx, AuditRecord{Kind: AuditTokenChange, Actor: "operator", Agent: agent,
			Body: auditBody(map[string]string{"op": "revoke", "token": id})})
		return err
	})
}

// --- cards -----------------------------------------------------------------

const cardColumns = `c.id, c.holder, c.spec, c.parents, c.system, c.manager, c.created_at, c.expires_at, r.revoked_at`

const cardFrom = ` FROM cards c LEFT JOIN revocations r ON r.card_id = c.id `

type scanner interface{ Scan(...any) error }

func (s *DB) scanCard(row scanner) (cards.Card, error) {
	var c cards.Card
	var spec, parents string
	var system int
	var created int64
	var expires, revoked sql.NullInt64
	if err := row.Scan(&c.ID, &c.Holder, &spec, &parents, &system, &c.Manager, &created, &expires, &revoked); err != nil {
		return c, err
	}
	if cached, ok := s.specs.get(c.ID, spec); ok {
		c.Spec = cached
	} else {
		if err := json.Unmarshal([]byte(spec), &c.Spec); err != nil {
			return c, fmt.Errorf("card %s: stored grants do not parse: %w", c.ID, err)
		}
		s.specs.put(c.ID, spec, c.Spec)
	}
	if err := json.Unmarshal([]byte(parents), &c.Parents); err != nil {
		return c, fmt.Errorf("card %s: stored parents do not parse: %w", c.ID, err)
	}
	c.System = system != 0
	c.Created = time.Unix(0, created).UTC()
	c.Expires = time.Time{}
	if expires.Valid {
		c.Expires = time.Unix(0, expires.Int64).UTC()
	}
	if revoked.Valid {
		c.Revoked = time.Unix(0, revoked.Int64).UTC()
	}
	return c, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *DB) loadCard(ctx context.Context, q querier, id string) (cards.Card, error) {
	c, err := s.scanCard(q.QueryRowContext(ctx, `SELECT `+cardColumns+cardFrom+`WHERE c.id = ?`, id))
	if isNoRows(err) {
		return c, fmt.Errorf("%w %q", ErrUnknownCard, id)
	}
	return c, err
}

func (s *DB) queryCards(ctx context.Context, q querier, where string, args ...any) ([]cards.Card, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+cardColumns+cardFrom+where+` ORDER BY c.seq`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []cards.Card
	for rows.Next() {
		c, err := s.scanCard(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Card returns one card.
func (s *DB) Card(ctx context.Context, id string) (cards.Card, error) {
	c, err := s.loadCard(ctx, s.db, id)
	if err != nil {
		return c, err
	}
	one := []cards.Card{c}
	err = s.withSpent(ctx, one)
	return one[0], err
}

// Cards lists cards.
func (s *DB) Cards(ctx context.Context, agent string) ([]cards.Card, error) {
	cs, err := s.queryCards(ctx, s.db, `WHERE c.holder = ? OR ? = ''`, agent, agent)
	if err != nil {
		return nil, err
	}
	return cs, s.withSpent(ctx, cs)
}

// Wallet pins agent's live cards. It is one SELECT, which SQLite (and
// PostgreSQL) answer from one snapshot: a revocation is either wholly in
// the wallet or not at all.
func (s *DB) Wallet(ctx context.Context, agent string, at time.Time) (*cards.Wallet, error) {
	cs, err := s.queryCards(ctx, s.db, `WHERE c.holder = ? AND r.revoked_at IS NULL AND (c.expires_at IS NULL OR c.expires_at > ?)`, agent, at.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("wallet of agent %q: %w", agent, err)
	}
	return cards.NewWallet(agent, at, cs), nil
}

// insertCard writes a new card and its lineage.
func (s *DB) insertCard(ctx context.Context, tx *sql.Tx, c cards.Card) error {
	spec := c.Spec
	spec.Expires = time.Time{} // the column is the one place it lives
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	parents := c.Parents
	if parents == nil {
		parents = []string{}
	}
	parentsJSON, _ := json.Marshal(parents)
	var expires any
	if !c.Expires.IsZero() {
		expires = c.Expires.UnixNano()
	}
	system := 0
	if c.System {
		system = 1
	}
	// seq orders cards by creation. MAX+1 is safe because every write
	// transaction holds the write lock (a PostgreSQL store uses a sequence).
	_, err = tx.ExecContext(ctx, `INSERT INTO cards (id, seq, holder, spec, parents, system, manager, created_at, expires_at)
		VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM cards), ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.Holder, string(specJSON), string(parentsJSON), system, c.Manager, c.Created.UnixNano(), expires)
	if err != nil {
		return fmt.Errorf("insert card: %w", err)
	}
	for _, p := range c.Parents {
		if _, err := tx.ExecContext(ctx, `INSERT INTO card_parents (child, parent) VALUES (?, ?)`, c.ID, p); err != nil {
			return fmt.Errorf("insert card lineage: %w", err)
		}
	}
	return nil
}

func (s *DB) newCard(holder, manager string, parents []string, spec cards.Spec) cards.Card {
	return cards.Card{
		ID: "card_" + randomHex(12), Holder: holder, Parents: parents, Spec: spec,
		Manager: manager, Created: s.now().UTC(),
	}
}

func (s *DB) checkSpec(spec cards.Spec) error {
	if !spec.Expires.IsZero() && !spec.Expires.After(s.now()) {
		return fmt.Errorf("%w: the card would expire at %s, which is not in the future", cards.ErrCardExpired, spec.Expires.UTC().Format(time.RFC3339))
	}
	for _, list := range [][]cards.Grant{spec.LowerPos, spec.LowerNeg, spec.UpperPos, spec.UpperNeg} {
		for _, g := range list {
			if g.Grant.String() == "" {
				return fmt.Errorf("%w: a card holds an empty grant", ErrBadInput)
			}
		}
	}
	if err := spec.Budget.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	return nil
}

// Grant installs a root card by the operator.
func (s *DB) Grant(ctx context.Context, agent string, spec cards.Spec) (cards.Card, error) {
	if err := s.checkSpec(spec); err != nil {
		return cards.Card{}, fmt.Errorf("grant to agent %q: %w", agent, err)
	}
	if err := cards.CheckInstall(spec, agent); err != nil {
		return cards.Card{}, fmt.Errorf("grant to agent %q: %w", agent, err)
	}
	c := s.newCard(agent, "operator", nil, spec)
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := mustAgent(ctx, tx, agent); err != nil {
			return err
		}
		if err := s.insertCard(ctx, tx, c); err != nil {
			return err
		}
		return s.auditCard(ctx, tx, Operator(), "grant", c.ID, agent, nil)
	})
	if err != nil {
		return cards.Card{}, fmt.Errorf("grant to agent %q: %w", agent, err)
	}
	return c, nil
}

// SyncSystemCards reconciles agent's system cards with specs.
func (s *DB) SyncSystemCards(ctx context.Context, agent string, specs []cards.Spec) (added, revoked int, err error) {
	want := map[string]cards.Spec{}
	for i, spec := range specs {
		if !spec.Expires.IsZero() {
			return 0, 0, fmt.Errorf("system cards of agent %q: card %d: %w: system cards do not expire", agent, i, ErrBadInput)
		}
		if err := s.checkSpec(spec); err != nil {
			return 0, 0, fmt.Errorf("system cards of agent %q: card %d: %w", agent, i, err)
		}
		if err := cards.CheckInstall(spec, agent); err != nil {
			return 0, 0, fmt.Errorf("system cards of agent %q: card %d: %w", agent, i, err)
		}
		key, _ := json.Marshal(spec)
		want[string(key)] = spec
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		added, revoked = 0, 0
		if err := mustAgent(ctx, tx, agent); err != nil {
			return err
		}
		have, err := s.queryCards(ctx, tx, `WHERE c.holder = ? AND c.system = 1 AND r.revoked_at IS NULL`, agent)
		if err != nil {
			return err
		}
		for _, c := range have {
			spec := c.Spec
			key, _ := json.Marshal(spec)
			if _, ok := want[string(key)]; ok {
				delete(want, string(key))
				continue
			}
			n, err := s.revokeCascade(ctx, tx, c.ID, Operator(), "no longer in the configuration")
			if err != nil {
				return err
			}
			if err := s.auditCard(ctx, tx, Operator(), "revoke-system", c.ID, agent, map[string]any{"revoked": n}); err != nil {
				return err
			}
			revoked += n
		}
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		slices.Sort(keys) // a stable order of IDs for the same configuration
		for _, k := range keys {
			c := s.newCard(agent, "system", nil, want[k])
			c.System = true
			if err := s.insertCard(ctx, tx, c); err != nil {
				return err
			}
			if err := s.auditCard(ctx, tx, Operator(), "install-system", c.ID, agent, nil); err != nil {
				return err
			}
			added++
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("system cards of agent %q: %w", agent, err)
	}
	return added, revoked, nil
}

// check refuses the zero Actor before anything is read.
func (a Actor) check() error {
	if !a.operator && a.agent == "" {
		return fmt.Errorf("%w: no actor", ErrNotAllowed)
	}
	return nil
}

// cardOp is a card operation an agent's wallet must allow: card:verb on
// resource (a card's ID; for install, the agent whose wallet receives the
// card).
type cardOp struct{ verb, resource string }

// authorize checks, inside tx, that actor may do every one of ops, in
// order, on one read of its wallet: the operator always; an agent only
// with a live card of its own allowing each. The first refused is the
// error.
func (s *DB) authorize(ctx context.Context, tx *sql.Tx, actor Actor, ops ...cardOp) error {
	if actor.operator {
		return nil
	}
	if actor.agent == "" {
		return fmt.Errorf("%w: no actor", ErrNotAllowed)
	}
	now := s.now()
	cs, err := s.queryCards(ctx, tx, `WHERE c.holder = ? AND r.revoked_at IS NULL`, actor.agent)
	if err != nil {
		return err
	}
	basis := decide.Basis{Wallet: cards.NewWallet(actor.agent, now, cs)}
	for _, op := range ops {
		if d := decide.Decide(basis, decide.Operate(op.verb, op.resource)); !d.Allow {
			return fmt.Errorf("%w: %s", ErrNotAllowed, d.Reason)
		}
	}
	return nil
}

// Derive makes a child card.
func (s *DB) Derive(ctx context.Context, actor Actor, parentID, to string, spec cards.Spec) (cards.Card, error) {
	if err := actor.check(); err != nil {
		return cards.Card{}, err
	}
	var child cards.Card
	err := s.write(ctx, func(tx *sql.Tx) error {
		parent, err := s.loadCard(ctx, tx, parentID)
		if err != nil {
			return err
		}
		if err := mustAgent(ctx, tx, to); err != nil {
			return err
		}
		if !actor.operator && parent.Holder != actor.agent {
			return fmt.Errorf("%w: agent %q does not hold card %s", ErrNotAllowed, actor.agent, parentID)
		}
		// Installing a card in a wallet needs card:install for that
		// wallet (CARDS.md, Install), the agent's own too: a card:derive
		// grant alone must not let an agent place cards in others'
		// wallets (a prohibition of upper-negative grants only would
		// deny every call of theirs it covers).
		if err := s.authorize(ctx, tx, actor, cardOp{"derive", parent.ID}, cardOp{"install", to}); err != nil {
			return err
		}
		if err := cards.CheckDerive(parent, spec, s.now()); err != nil {
			return err
		}
		// Budgets only shrink: a key the parent's chain limits and the
		// child does not name is given what the chain has left; one named
		// must be at most that (budget-too-broad), read in this
		// transaction under the chain's budget locks, so no spend comes
		// between the read and the child.
		chain, _, err := s.lockedChain(ctx, tx, parentID)
		if err != nil {
			return err
		}
		spec.Budget = cards.FillBudget(spec.Budget, chain)
		if err := cards.CheckBudget(spec.Budget, chain); err != nil {
			return err
		}
		if err := s.checkSpec(spec); err != nil {
			return err
		}
		if err := cards.CheckInstall(spec, to); err != nil {
			return err
		}
		manager := "operator"
		if !actor.operator {
			manager = actor.agent
		}
		child = s.newCard(to, manager, []string{parentID}, spec)
		if err := s.insertCard(ctx, tx, child); err != nil {
			return err
		}
		return s.auditCard(ctx, tx, actor, "derive", child.ID, to, map[string]any{"parent": parentID})
	})
	if err != nil {
		return cards.Card{}, fmt.Errorf("derive from card %s for agent %q: %w", parentID, to, err)
	}
	return child, nil
}

// Transfer moves a card to another wallet.
func (s *DB) Transfer(ctx context.Context, actor Actor, id, to string) error {
	if err := actor.check(); err != nil {
		return err
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		c, err := s.loadCard(ctx, tx, id)
		if err != nil {
			return err
		}
		switch {
		case !c.Revoked.IsZero():
			return fmt.Errorf("%w: card %s", cards.ErrCardRevoked, id)
		case c.ExpiredAt(s.now()):
			return fmt.Errorf("%w: card %s", cards.ErrCardExpired, id)
		case c.System && !actor.operator:
			return fmt.Errorf("%w: card %s comes from the configuration; only the operator moves it", cards.ErrSystemCard, id)
		case !actor.operator && c.Holder != actor.agent:
			return fmt.Errorf("%w: agent %q does not hold card %s", ErrNotAllowed, actor.agent, id)
		}
		if err := mustAgent(ctx, tx, to); err != nil {
			return err
		}
		if err := s.authorize(ctx, tx, actor, cardOp{"transfer", c.ID}, cardOp{"install", to}); err != nil {
			return err
		}
		if err := cards.CheckInstall(c.Spec, to); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, `UPDATE cards SET holder = ? WHERE id = ?`, to, id); err != nil {
			return err
		}
		return s.auditCard(ctx, tx, actor, "transfer", id, to, map[string]any{"from": c.Holder})
	})
	if err != nil {
		return fmt.Errorf("transfer card %s to agent %q: %w", id, to, err)
	}
	return nil
}

// Revoke revokes a card and its descendants.
func (s *DB) Revoke(ctx context.Context, actor Actor, id string) (int, error) {
	if err := actor.check(); err != nil {
		return 0, err
	}
	var n int
	err := s.write(ctx, func(tx *sql.Tx) error {
		c, err := s.loadCard(ctx, tx, id)
		if err != nil {
			return err
		}
		// An agent's authority over the card first, so that an agent learns
		// nothing about cards outside its reach (revoked or not, system or
		// not) from which refusal it gets.
		if !actor.operator {
			if err := s.holdsLineage(ctx, tx, actor.agent, c); err != nil {
				return err
			}
		}
		switch {
		case !c.Revoked.IsZero():
			return fmt.Errorf("%w: card %s was revoked at %s", cards.ErrCardRevoked, id, c.Revoked.Format(time.RFC3339))
		case c.System && !actor.operator:
			return fmt.Errorf("%w: card %s comes from the configuration; only the operator revokes it", cards.ErrSystemCard, id)
		}
		if err := s.authorize(ctx, tx, actor, cardOp{"revoke", c.ID}); err != nil {
			return err
		}
		if n, err = s.revokeCascade(ctx, tx, id, actor, "revoked "+id); err != nil {
			return err
		}
		return s.auditCard(ctx, tx, actor, "revoke", id, c.Holder, map[string]any{"revoked": n})
	})
	if err != nil {
		return 0, fmt.Errorf("revoke card %s: %w", id, err)
	}
	return n, nil
}

// auditCard appends a card-change record inside the card operation's
// transaction: the change and its record commit together or not at all.
func (s *DB) auditCard(ctx context.Context, tx *sql.Tx, actor Actor, op, id, agent string, extra map[string]any) error {
	body := map[string]any{"op": op, "card": id}
	for k, v := range extra {
		body[k] = v
	}
	_, err := s.appendAudit(ctx, tx, AuditRecord{Kind: AuditCardChange, Actor: actor.String(), Agent: agent, Body: auditBody(body)})
	return err
}

// holdsLineage checks that agent holds c or one of its ancestors (a parent
// agent takes back what it handed a sub-agent).
func (s *DB) holdsLineage(ctx context.Context, tx *sql.Tx, agent string, c cards.Card) error {
	seen := map[string]bool{}
	queue := []cards.Card{c}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur.Holder == agent {
			return nil
		}
		for _, p := range cur.Parents {
			if seen[p] {
				continue
			}
			seen[p] = true
			pc, err := s.loadCard(ctx, tx, p)
			if err != nil {
				return err
			}
			queue = append(queue, pc)
		}
	}
	return fmt.Errorf("%w: agent %q holds neither card %s nor any card it was derived from", ErrNotAllowed, agent, c.ID)
}

// revokeCascade revokes root and its descendants inside tx and returns how
// many were newly revoked (descendants revoked earlier are not counted).
func (s *DB) revokeCascade(ctx context.Context, tx *sql.Tx, root string, actor Actor, cause string) (int, error) {
	ids, err := cards.Cascade(root, func(level []string) ([]string, error) {
		var kids []string
		for len(level) > 0 {
			chunk := level[:min(len(level), 400)] // under every engine's parameter limit
			level = level[len(chunk):]
			args := make([]any, len(chunk))
			for i, id := range chunk {
				args[i] = id
			}
			rows, err := tx.QueryContext(ctx, `SELECT child FROM card_parents WHERE parent IN (?`+strings.Repeat(", ?", len(chunk)-1)+`) ORDER BY child`, args...)
			if err != nil {
				return nil, err
			}
			for rows.Next() {
				var k string
				if err := rows.Scan(&k); err != nil {
					rows.Close()
					return nil, err
				}
				kids = append(kids, k)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, err
			}
		}
		return kids, nil
	})
	if err != nil {
		return 0, err
	}
	now := s.now().UnixNano()
	n := 0
	for _, id := range ids {
		res, err := tx.ExecContext(ctx, `INSERT INTO revocations (card_id, revoked_at, actor, cause)
			SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM revocations WHERE card_id = ?)`, id, now, actor.String(), cause, id)
		if err != nil {
			return 0, err
		}
		k, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		n += int(k)
	}
	return n, nil
}

// specCache keeps decoded card specs by card ID. A card's grants never
// change once written, so a hit (same ID, same stored text) skips the JSON
// decoding and grant parsing that dominate pinning a large wallet. It is
// bounded: when full it starts over.
type specCache struct {
	mu sync.Mutex
	m  map[string]cachedSpec
}

type cachedSpec struct {
	text string
	spec cards.Spec
}

const specCacheMax = 8192

func (c *specCache) get(id, text string) (cards.Spec, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || e.text != text {
		return cards.Spec{}, false
	}
	return e.spec, true
}

func (c *specCache) put(id, text string, spec cards.Spec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= specCacheMax {
		c.m = make(map[string]cachedSpec)
	}
	c.m[id] = cachedSpec{text: text, spec: spec}
}

// tokenCache keeps token rows read by Authenticate, each with the
// CardsGeneration it was read at.
type tokenCache struct {
	mu sync.Mutex
	m  map[string]cachedToken
}

type cachedToken struct {
	gen         int64
	agent, hash string
	revoked     bool
}

// maxCachedTokens bounds the cache: beyond it, it starts over.
const maxCachedTokens = 4096

func (c *tokenCache) get(id string, gen int64) (cachedToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[id]
	return t, ok && t.gen == gen
}

func (c *tokenCache) put(id string, t cachedToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedTokens {
		c.m = map[string]cachedToken{}
	}
	c.m[id] = t
}
