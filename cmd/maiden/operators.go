package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/config"
	"github.com/pelletier/go-toml/v2"
)

// This file is `maiden operators`: the bearer tokens of the humans who
// decide approval requests on the inbox page (/ui of maiden serve -http).
// It mirrors `maiden agents`; operator tokens are another principal kind
// (admin/operators.go): no agent token ever authenticates as an
// operator, nor an operator token as an agent.

// errUnknownOperator: the name is not an [operators.NAME] of agent.toml.
var errUnknownOperator = errors.New("unknown operator")

const operatorsTokenHelp = `Mints a bearer token for operator NAME (an [operators.NAME] table of agent.toml) and
prints it once: only a hash is stored. The operator signs in to the inbox page (/ui of
maiden serve -http) with it, to decide approval requests and revoke cards. It is not an agent
token: it calls no tool, and no agent token signs in as an operator. An operator's token
also reads /metrics.

With -role metrics: a scraper's token (Prometheus's), which reads /metrics and nothing else:
it signs in to no inbox and decides nothing. /metrics never takes an agent's token, since
its metrics name every agent's tools. With -json: {"operator": NAME, "token": TOKEN, "role": ROLE}. "maiden operators ls" lists tokens by ID;
"maiden operators revoke-token ID" ends one at once.

Exit codes: 0 done; 2 bad command line or an operator agent.toml does not declare;
1 the state store failed.`

const operatorsLsHelp = `Lists the operators declared in agent.toml and those the state store still holds (an
operator removed from agent.toml keeps its tokens in the store, but they sign in nobody), each
with its tokens: ID, when minted, when revoked. Never a token's secret.

Exit codes: 0 done; 2 bad command line; 1 the state store failed.`

const operatorsRevokeHelp = `Revokes an operator token by its ID (from "maiden operators ls"): the next request with
it is refused, in every process that shares the state store. An agent token's ID is not an
operator token's: revoke those with "maiden agents revoke-token".

Exit codes: 0 done; 2 bad command line or no operator token of that ID; 1 the state store failed.`

func cmdOperatorsToken(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("operators token", stderr)
	asJSON := fs.Bool("json", false, `print {"operator": NAME, "token": TOKEN, "role": ROLE}`)
	role := fs.String("role", admin.RoleOperator, "`ROLE`: operator (the inbox and /metrics) or metrics (a scraper's token: /metrics only)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: maiden operators token NAME [-role operator|metrics] [-json]")
		return exitUsage
	}
	if *role != admin.RoleOperator && *role != admin.RoleMetrics {
		fmt.Fprintf(stderr, "maiden operators token: -role %q: want operator or metrics\n", *role)
		return exitUsage
	}
	s, code := c.openStateFor(ctx, stderr, true)
	if s == nil {
		return code
	}
	defer s.close()
	name := pos[0]
	if _, ok := s.cfg.Operator(name); !ok {
		return failed(stderr, "operators token", fmt.Errorf("%w %q: not an [operators.NAME] of %s (%s)", errUnknownOperator, name, s.file, operatorNames(s.cfg)))
	}
	token, info, err := s.st.MintOperatorToken(ctx, name, *role)
	if err != nil {
		return failed(stderr, "operators token", err)
	}
	if *asJSON {
		printJSON(stdout, struct {
			Operator string `json:"operator"`
			Token    string `json:"token"`
			Role     string `json:"role"`
		}{name, token, *role})
	} else {
		fmt.Fprintln(stdout, token)
	}
	kind := "operator token"
	if *role == admin.RoleMetrics {
		kind = "metrics token (/metrics only)"
	}
	fmt.Fprintf(stderr, "%s %s for %q: shown once, only its hash is stored (revoke: maiden operators revoke-token %s)\n", kind, info.ID, name, info.ID)
	return exitOK
}

// operatorNames describes the operators cfg declares, for an error.
func operatorNames(cfg *config.Config) string {
	var names []string
	for _, o := range cfg.Operators() {
		names = append(names, o.Name)
	}
	if len(names) == 0 {
		return "it declares none: add an [operators.NAME] table"
	}
	return "its operators: " + strings.Join(names, ", ")
}

// operatorEntry is one operator as operators ls shows it.
type operatorEntry struct {
	Name     string                    `json:"name"`
	Declared bool                      `json:"declared"` // in agent.toml (else only in the store)
	Tokens   []admin.OperatorTokenInfo `json:"tokens"`
}

func cmdOperatorsLs(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("operators ls", stderr)
	asJSON := fs.Bool("json", false, "print JSON: [{name, declared, tokens: [{id, operator, role, created, revoked}]}]")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "maiden operators ls: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	s, code := c.openStateFor(ctx, stderr, true)
	if s == nil {
		return code
	}
	defer s.close()
	stored, err := s.st.Operators(ctx)
	if err != nil {
		return failed(stderr, "operators ls", err)
	}
	tokens, err := s.st.OperatorTokens(ctx, "")
	if err != nil {
		return failed(stderr, "operators ls", err)
	}
	list := []operatorEntry{}
	for _, o := range s.cfg.Operators() {
		list = append(list, operatorEntry{Name: o.Name, Declared: true, Tokens: []admin.OperatorTokenInfo{}})
	}
	for _, o := range stored {
		if _, ok := s.cfg.Operator(o.Name); !ok {
			list = append(list, operatorEntry{Name: o.Name, Tokens: []admin.OperatorTokenInfo{}})
		}
	}
	slices.SortFunc(list, func(a, b operatorEntry) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range tokens {
		if i := slices.IndexFunc(list, func(e operatorEntry) bool { return e.Name == t.Operator }); i >= 0 {
			list[i].Tokens = append(list[i].Tokens, t)
		}
	}
	if *asJSON {
		printJSON(stdout, list)
		return exitOK
	}
	if len(list) == 0 {
		fmt.Fprintf(stdout, "no operators: %s declares no [operators.NAME] table\n", s.file)
	}
	for _, o := range list {
		where := "declared in " + s.file
		if !o.Declared {
			where = "only in the state store (not in " + s.file + ": its tokens sign in nobody)"
		}
		fmt.Fprintf(stdout, "%s  %s\n", o.Name, where)
		if len(o.Tokens) == 0 {
			fmt.Fprintln(stdout, "  no tokens")
		}
		for _, t := range o.Tokens {
			state := "live"
			if !t.Revoked.IsZero() {
				state = "revoked " + t.Revoked.Local().Format(time.DateTime)
			}
			fmt.Fprintf(stdout, "  token %s  %-8s  created %s  %s\n", t.ID, t.Role, t.Created.Local().Format(time.DateTime), state)
		}
	}
	return exitOK
}

func cmdOperatorsRevokeToken(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("operators revoke-token", stderr)
	asJSON := fs.Bool("json", false, `print {"revoked": ID, "operator": NAME}`)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: maiden operators revoke-token ID [-json]")
		return exitUsage
	}
	s, code := c.openStateFor(ctx, stderr, true)
	if s == nil {
		return code
	}
	defer s.close()
	id := pos[0]
	tokens, err := s.st.OperatorTokens(ctx, "")
	if err != nil {
		return failed(stderr, "operators revoke-token", err)
	}
	i := slices.IndexFunc(tokens, func(t admin.OperatorTokenInfo) bool { return t.ID == id })
	if i < 0 {
		return failed(stderr, "operators revoke-token", fmt.Errorf("%w %q: no operator token has that ID in %s (\"maiden operators ls\" lists them; an agent's token is revoked with \"maiden agents revoke-token\")", admin.ErrUnknownToken, id, s.path))
	}
	if err := s.st.RevokeOperatorToken(ctx, id); err != nil {
		return failed(stderr, "operators revoke-token", err)
	}
	if *asJSON {
		printJSON(stdout, struct {
			Revoked  string `json:"revoked"`
			Operator string `json:"operator"`
		}{id, tokens[i].Operator})
	} else {
		fmt.Fprintf(stdout, "revoked operator token %s of %q\n", id, tokens[i].Operator)
	}
	return exitOK
}

// completeOperators completes NAME with the [operators.NAME] tables of the
// agent.toml that -config names, read as TOML only.
func completeOperators(i int, flags map[string]string) completion {
	if i > 0 {
		return completion{}
	}
	path := flags["config"]
	if path == "" {
		path = os.Getenv("MAIDEN_CONFIG")
	}
	if path == "" {
		path = "agent.toml"
	}
	data, err := config.ReadFile(path, config.MaxFileBytes)
	if err != nil {
		return completion{}
	}
	var doc struct {
		Operators map[string]any `toml:"operators"`
	}
	if toml.Unmarshal(data, &doc) != nil {
		return completion{}
	}
	var names []string
	for name := range doc.Operators {
		if config.ValidName(name) { // as completeCall: never a name config would refuse
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return choices(names...)(0, nil)
}
