package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/safetext"
)

// This file is the operator's side of agents: tokens, and the state store
// the agents and cards commands (cards.go) share.

// Exit codes of the agents and cards commands, beyond exitOK: a bad command
// line, a malformed grant, or an unknown agent, card or token is exitUsage;
// a change the card rules refuse (a derivation that broadens, an expired or
// revoked card, ...) is exitDenied; a state store that cannot answer is
// exitState.
const exitState = 1

const stateExitHelp = `Exit codes: 0 done; 2 bad command line, malformed GRANT (the error gives its column and
what was expected), or an agent, card or token that does not exist (agents must be declared in
agent.toml); 6 refused by the card rules (lower-bound-too-broad, upper-bound-too-broad,
card-expired, card-revoked, install-recipient-mismatch, system-card), nothing written;
1 the state store failed.`

const agentsTokenHelp = `Mints a bearer token for agent NAME (declared in agent.toml) and prints it once: only
a hash is stored. An HTTP client sends it as "Authorization: Bearer TOKEN" to maiden serve -http.
With -json: {"agent": NAME, "token": TOKEN}. "maiden agents ls" lists tokens by ID;
"maiden agents revoke-token ID" ends one at once.

` + stateExitHelp

const agentsLsHelp = `Lists the agents declared in agent.toml and those the state store still holds (an agent
removed from agent.toml keeps its cards and tokens in the store, but no call can run as it), each
with its tokens: ID, when minted, when revoked. Never a token's secret.

` + stateExitHelp

// operatorState is what an operator command works on: the configuration
// and its state store, holding the configuration's agents and system cards.
type operatorState struct {
	cfg  *config.Config
	file string // agent.toml, as named on the command line
	path string // the store's file
	st   *admin.State
}

// openState loads agent.toml, refuses one without [agents], opens the store
// and writes the configuration's agents and system cards to it (as the
// runtime does before its first authorized call).
func (c *common) openState(ctx context.Context, stderr io.Writer) (*operatorState, int) {
	return c.openStateFor(ctx, stderr, false)
}

// openStateFor is openState; implicitOK accepts a configuration without
// [agents] (approvals, the audit trail and operators exist without them).
func (c *common) openStateFor(ctx context.Context, stderr io.Writer, implicitOK bool) (*operatorState, int) {
	cfg, err := config.Load(c.config)
	if err != nil {
		printConfigErrors(stderr, err)
		return nil, exitUsage
	}
	if cfg.Implicit() && !implicitOK {
		fmt.Fprintf(stderr, "maiden: %s declares no [agents]: every call runs as the implicit agent %q, allowed everything; declare [agents.NAME] tables to give agents tokens and cards\n",
			c.config, maiden.DefaultAgent)
		return nil, exitUsage
	}
	path := c.statePath(cfg)
	st, err := admin.OpenStore(ctx, path, nil)
	if err != nil {
		fmt.Fprintf(stderr, "maiden: state store %s: %v\n", path, err)
		return nil, exitState
	}
	if err := st.Sync(ctx, cfg); err != nil {
		st.Close()
		fmt.Fprintf(stderr, "maiden: state store %s: writing the agents of %s: %v\n", path, c.config, err)
		return nil, stateCode(err)
	}
	return &operatorState{cfg: cfg, file: c.config, path: path, st: st}, exitOK
}

func (s *operatorState) close() { s.st.Close() }

// declared checks that agent is an [agents.NAME] of agent.toml.
func (s *operatorState) declared(agent string) error {
	if _, ok := s.cfg.Agent(agent); ok {
		return nil
	}
	var names []string
	for _, a := range s.cfg.Agents() {
		names = append(names, a.Name)
	}
	return fmt.Errorf("%w %q: not declared in %s (its agents: %s)", admin.ErrUnknownAgent, agent, s.file, strings.Join(names, ", "))
}

// stateCode maps an error of a store operation to an exit code.
func stateCode(err error) int {
	switch {
	case errors.Is(err, admin.ErrBadGrant), errors.Is(err, admin.ErrBadBudget),
		errors.Is(err, admin.ErrUnknownAgent), errors.Is(err, admin.ErrUnknownCard),
		errors.Is(err, admin.ErrUnknownToken), errors.Is(err, admin.ErrBadInput),
		errors.Is(err, errUnknownOperator):
		return exitUsage
	case admin.Refused(err):
		// the card rules (lower-bound-too-broad, card-revoked, ...) or an
		// agent without the card that allows the operation
		return exitDenied
	}
	return exitState
}

// failed prints err for command name and returns its exit code.
func failed(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "maiden %s: %v\n", name, err)
	return stateCode(err)
}

// printJSON writes v as indented JSON, with the bidirectional, zero-width
// and C1 controls an agent's text may hold as \u escapes (safetext.JSON):
// the same JSON value for a script, which no longer reorders or hides
// anything on the terminal an operator reads it on (encoding/json escapes
// only the C0 controls).
func printJSON(w io.Writer, v any) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	io.WriteString(w, safetext.JSON(b.String()))
}

func cmdAgentsToken(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("agents token", stderr)
	asJSON := fs.Bool("json", false, `print {"agent": NAME, "token": TOKEN}`)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: maiden agents token NAME [-json]")
		return exitUsage
	}
	s, code := c.openState(ctx, stderr)
	if s == nil {
		return code
	}
	defer s.close()
	agent := pos[0]
	if err := s.declared(agent); err != nil {
		return failed(stderr, "agents token", err)
	}
	token, info, err := s.st.MintToken(ctx, agent)
	if err != nil {
		return failed(stderr, "agents token", err)
	}
	if *asJSON {
		printJSON(stdout, struct {
			Agent string `json:"agent"`
			Token string `json:"token"`
		}{agent, token})
	} else {
		fmt.Fprintln(stdout, token)
	}
	fmt.Fprintf(stderr, "token %s for agent %q: shown once, only its hash is stored (revoke: maiden agents revoke-token %s)\n", info.ID, agent, info.ID)
	return exitOK
}

// agentEntry is one agent as agents ls shows it.
type agentEntry struct {
	Name     string            `json:"name"`
	Declared bool              `json:"declared"` // in agent.toml (else only in the store)
	Created  time.Time         `json:"created,omitzero"`
	Tokens   []admin.TokenInfo `json:"tokens"`
}

func cmdAgentsLs(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("agents ls", stderr)
	asJSON := fs.Bool("json", false, "print JSON: [{name, declared, created, tokens: [{id, agent, created, revoked}]}]")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "maiden agents ls: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	s, code := c.openState(ctx, stderr)
	if s == nil {
		return code
	}
	defer s.close()
	stored, err := s.st.Agents(ctx)
	if err != nil {
		return failed(stderr, "agents ls", err)
	}
	tokens, err := s.st.Tokens(ctx, "")
	if err != nil {
		return failed(stderr, "agents ls", err)
	}
	var list []agentEntry
	for _, a := range stored {
		_, decl := s.cfg.Agent(a.Name)
		list = append(list, agentEntry{Name: a.Name, Declared: decl, Created: a.Created, Tokens: []admin.TokenInfo{}})
	}
	slices.SortFunc(list, func(a, b agentEntry) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range tokens {
		i := slices.IndexFunc(list, func(e agentEntry) bool { return e.Name == t.Agent })
		if i >= 0 {
			list[i].Tokens = append(list[i].Tokens, t)
		}
	}
	if *asJSON {
		if list == nil {
			list = []agentEntry{}
		}
		printJSON(stdout, list)
		return exitOK
	}
	for _, a := range list {
		where := "declared in " + s.file
		if !a.Declared {
			where = "only in the state store (not in " + s.file + ": no call can run as it)"
		}
		fmt.Fprintf(stdout, "%s  %s\n", a.Name, where)
		if len(a.Tokens) == 0 {
			fmt.Fprintln(stdout, "  no tokens")
		}
		for _, t := range a.Tokens {
			state := "live"
			if !t.Revoked.IsZero() {
				state = "revoked " + t.Revoked.Local().Format(time.DateTime)
			}
			fmt.Fprintf(stdout, "  token %s  created %s  %s\n", t.ID, t.Created.Local().Format(time.DateTime), state)
		}
	}
	return exitOK
}

func cmdAgentsRevokeToken(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("agents revoke-token", stderr)
	asJSON := fs.Bool("json", false, `print {"revoked": ID, "agent": NAME}`)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: maiden agents revoke-token ID [-json]")
		return exitUsage
	}
	s, code := c.openState(ctx, stderr)
	if s == nil {
		return code
	}
	defer s.close()
	id := pos[0]
	// The token's agent, for the message (and a clear error for an unknown ID).
	tokens, err := s.st.Tokens(ctx, "")
	if err != nil {
		return failed(stderr, "agents revoke-token", err)
	}
	i := slices.IndexFunc(tokens, func(t admin.TokenInfo) bool { return t.ID == id })
	if i < 0 {
		// An operator's token has an ID too, in the same listing style:
		// point to the command that revokes it.
		if ops, err := s.st.OperatorTokens(ctx, ""); err == nil {
			if j := slices.IndexFunc(ops, func(t admin.OperatorTokenInfo) bool { return t.ID == id }); j >= 0 {
				fmt.Fprintf(stderr, "maiden agents revoke-token: %q is a token of operator %q, not of an agent: revoke it with maiden operators revoke-token %s\n", id, ops[j].Operator, id)
				return exitUsage
			}
		}
		return failed(stderr, "agents revoke-token", fmt.Errorf("%w %q in %s (\"maiden agents ls\" lists them)", admin.ErrUnknownToken, id, s.path))
	}
	if err := s.st.RevokeToken(ctx, id); err != nil {
		return failed(stderr, "agents revoke-token", err)
	}
	if *asJSON {
		printJSON(stdout, struct {
			Revoked string `json:"revoked"`
			Agent   string `json:"agent"`
		}{id, tokens[i].Agent})
	} else {
		fmt.Fprintf(stdout, "revoked token %s of agent %q\n", id, tokens[i].Agent)
	}
	return exitOK
}
