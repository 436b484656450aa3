package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
)

// This file is `maiden audit whatif`: the audit trail's recorded decisions
// replayed on a proposed change of the cards (admin.State.WhatIf, the
// replay itself internal/whatif). Its exit codes are diff's, so that it can
// gate a change in CI.

// whatIfGCPercent is the garbage collector's target while a what-if
// replays (GOGC=400).
const whatIfGCPercent = 400

const (
	exitWhatIfSame  = 0 // nothing flips
	exitWhatIfFlips = 1 // a recorded decision flips
	exitWhatIfError = 2 // bad command line, unknown card or agent, bad grant, the store failed
)

const auditWhatIfHelp = `Replays the recorded decisions of the audit trail (the agents' cards deciding a call's
tool:invoke, an http-fetch's network:connect and secret:use, a reveal's secret:reveal, and an
approve layer's approve:always: an approval request, where a human was asked, counted as
asked, and a standing approval, where an always-card let a call skip the human, counted as
standing; both on the tool's binding, as the approve layer counts always-cards) on
the cards as they are now and on the same cards with a proposed change, and prints the
decisions whose outcome the change flips (allowed -> denied, denied -> allowed), grouped by
agent and tool with counts and examples. Nothing is written.

The change: -revoke ID (repeatable; a card with every card derived from it, as a revocation
does: revoking a prohibition or a ceiling card lifts it), and -agent NAME -grant GRANT (each
-grant goes to the -agent before it, as one new card per agent). -agent NAME -deny GRANT adds a
prohibition over the agent's wallet and -agent NAME -ceiling GRANT a ceiling (each kind one
more card per agent, as cards grant -deny and -ceiling make them). -agent NAME -grants FILE replaces the agent's cards with the grants of FILE (one
a line; blank lines and lines starting with # are passed over): every live card of the agent
is revoked (with the cards derived from it, in any wallet, as revoking them would) and the
file's grants become one new card. -config-after FILE is a change of agent.toml: a proposed
copy whose system grants replace each agent's system cards (with the cards derived from one it
drops, as the next sync would revoke them) and whose agents and bindings decide each replayed
call (a tool no longer bound, a host no longer in http_allow or its ports, a secret no longer
in secrets or reveal refuse; a reveal today's binding refused may pass); a FILE that does not
load is exit 2, naming its file, line and key. With no change it checks that the replay
reproduces the trail.

-since DURATION is the window (default 168h, a week; "7d" and other whole days are read too).
-json prints the whole report as one JSON object: since, until, change, replayed, verified,
inexact, stale, changed_since, unversioned, skipped, asked, standing, flips and groups (agent, tool,
allowed_to_denied, denied_to_allowed, examples with seq, at, agent, tool, record, target and
the recorded, before and after decisions).

A decision names the revision of the wallet that made it: replayed on a wallet of that same
revision it must come out exactly as recorded (verified), else the replay is inexact and
this command exits 2. An approve layer's answer to approve:always, recorded in its verdict,
is checked the same way, on the binding it was asked under. Decisions made on another revision (cards changed since) are counted
as stale; a flip compares today's cards with today's cards changed, so a change made since
is not blamed on the proposed one.

The window's records must verify as a chain (each follows the one before it, its hash its
own): a record deleted, edited or inserted is exit 2, naming it, and no answer.

Exit codes (as diff): 0 nothing flips; 1 a decision flips; 2 bad command line, an unknown
card or agent, a revoked card, a bad grant, an inexact replay, records that do not verify,
or the state store failed.`

// whatIfChange collects -revoke, -agent and -grant in order: a -grant
// belongs to the -agent before it.
type whatIfChange struct {
	change   api.WhatIfChange
	agent    string
	grantFor map[string]int // grants given per agent
	replace  []string       // agents whose cards -grants replaces
	err      error          // the first problem, reported after parsing
}

type revokeFlag struct{ c *whatIfChange }

func (f revokeFlag) String() string { return "" }
func (f revokeFlag) Set(id string) error {
	if strings.TrimSpace(id) == "" {
		return errors.New("a card ID")
	}
	f.c.change.Revoke = append(f.c.change.Revoke, id)
	return nil
}

type agentFlag struct{ c *whatIfChange }

func (f agentFlag) String() string { return "" }
func (f agentFlag) Set(name string) error {
	if name == "" {
		return errors.New("an agent's name")
	}
	if f.c.agent != "" && f.c.grantFor[f.c.agent] == 0 && f.c.err == nil {
		f.c.err = fmt.Errorf("-agent %s is followed by no -grant, -deny, -ceiling or -grants", f.c.agent)
	}
	f.c.agent = name
	return nil
}

// grantFlag is -grant, -deny or -ceiling (as): a grant of the -agent
// before it.
type grantFlag struct {
	c  *whatIfChange
	as string
}

func (f grantFlag) String() string { return "" }
func (f grantFlag) Set(g string) error {
	if f.c.agent == "" {
		name := "-grant"
		if f.as != "" {
			name = "-" + f.as
		}
		return fmt.Errorf("a %s needs an -agent NAME before it", name)
	}
	f.c.change.Grants = append(f.c.change.Grants, api.WhatIfGrant{Agent: f.c.agent, Grant: g, As: f.as})
	f.c.grantFor[f.c.agent]++
	return nil
}

// grantsFlag is -grants FILE: the -agent before it gets the file's grants
// as its only card (its live cards are revoked once the store is open).
type grantsFlag struct{ c *whatIfChange }

func (f grantsFlag) String() string { return "" }
func (f grantsFlag) Set(file string) error {
	if f.c.agent == "" {
		return errors.New("a -grants needs an -agent NAME before it")
	}
	if slices.Contains(f.c.replace, f.c.agent) {
		return fmt.Errorf("agent %s's cards are replaced once (one -grants FILE)", f.c.agent)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f.c.change.Grants = append(f.c.change.Grants, api.WhatIfGrant{Agent: f.c.agent, Grant: line})
	}
	f.c.replace = append(f.c.replace, f.c.agent)
	f.c.grantFor[f.c.agent]++
	return nil
}

// replaceCards adds the live cards of the agents -grants replaces to the
// cards the change revokes.
func (ch *whatIfChange) replaceCards(ctx context.Context, st *admin.State) error {
	now := time.Now()
	for _, agent := range ch.replace {
		cs, err := st.Cards(ctx, agent)
		if err != nil {
			return err
		}
		for _, c := range cs {
			if c.Revoked.IsZero() && !c.ExpiredAt(now) && !slices.Contains(ch.change.Revoke, c.ID) {
				ch.change.Revoke = append(ch.change.Revoke, c.ID)
			}
		}
	}
	return nil
}

// windowFlag is -since: a Go duration, or whole days ("7d").
type windowFlag struct{ d time.Duration }

func (f *windowFlag) String() string { return f.d.String() }
func (f *windowFlag) Set(s string) error {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 || days > 3650 {
			return errors.New("a duration such as 24h, 90m or 7d")
		}
		f.d = time.Duration(days) * 24 * time.Hour
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return errors.New("a positive duration such as 24h, 90m or 7d")
	}
	f.d = d
	return nil
}

func cmdAuditWhatIf(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("audit whatif", stderr)
	ch := &whatIfChange{grantFor: map[string]int{}}
	fs.Var(revokeFlag{ch}, "revoke", "revoke the card `ID` (and every card derived from it); repeatable")
	fs.Var(agentFlag{ch}, "agent", "the agent `NAME` the -grant flags after it give to")
	fs.Var(grantFlag{c: ch}, "grant", "give the -agent before it a card allowing `GRANT`; repeatable")
	fs.Var(grantFlag{c: ch, as: api.WhatIfDeny}, "deny", "give the -agent before it a card forbidding `GRANT` across its wallet (as cards grant -deny); repeatable")
	fs.Var(grantFlag{c: ch, as: api.WhatIfCeiling}, "ceiling", "give the -agent before it a card bounding its wallet by `GRANT` (as cards grant -ceiling); repeatable")
	fs.Var(grantsFlag{ch}, "grants", "replace the cards of the -agent before it with one card of the grants in `FILE` (one a line)")
	window := &windowFlag{d: admin.DefaultWhatIfWindow}
	fs.Var(window, "since", "replay the records of the last `DURATION` (default 168h; 7d reads as 168h)")
	after := fs.String("config-after", "", "replay also against the agents, bindings and system grants of the agent.toml `FILE` (a proposed copy)")
	asJSON := fs.Bool("json", false, "print the whole report as one JSON object")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitWhatIfError
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "maiden audit whatif: unexpected argument %q\n", pos[0])
		return exitWhatIfError
	}
	if ch.err == nil && ch.agent != "" && ch.grantFor[ch.agent] == 0 {
		ch.err = fmt.Errorf("-agent %s is followed by no -grant, -deny, -ceiling or -grants", ch.agent)
	}
	if ch.err != nil {
		fmt.Fprintf(stderr, "maiden audit whatif: %v (write -agent NAME -grant GRANT, -deny GRANT, -ceiling GRANT or -grants FILE)\n", ch.err)
		return exitWhatIfError
	}
	var afterCfg *config.Config
	if *after != "" {
		cfg, err := config.Load(*after)
		if err != nil {
			fmt.Fprintf(stderr, "maiden audit whatif: -config-after %s does not load:\n", *after)
			printConfigErrors(stderr, err)
			return exitWhatIfError
		}
		afterCfg = cfg
	}
	// The replay decodes every record's JSON and keeps little of it:
	// collecting that garbage a fifth as often took a fifth of the
	// command's CPU off (bench/whatif-e2e, docs/cards.md "Speed"), for a
	// heap of a few pages of records.
	defer debug.SetGCPercent(debug.SetGCPercent(whatIfGCPercent))
	st, _ := c.openAudit(ctx, "audit whatif", stderr)
	if st == nil {
		return exitWhatIfError
	}
	defer st.Close()
	if err := ch.replaceCards(ctx, st); err != nil {
		fmt.Fprintf(stderr, "maiden audit whatif: %v\n", err)
		return exitWhatIfError
	}
	rep, err := st.WhatIfConfig(ctx, ch.change, afterCfg, time.Now().Add(-window.d))
	if err != nil {
		fmt.Fprintf(stderr, "maiden audit whatif: %v\n", err)
		return exitWhatIfError
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "maiden audit whatif: %v\n", err)
			return exitWhatIfError
		}
	} else {
		printWhatIf(stdout, rep)
	}
	switch {
	case len(rep.Inexact) > 0:
		fmt.Fprintf(stderr, "maiden audit whatif: the replay did not reproduce %d decisions recorded on today's cards: its answer cannot be trusted (please report it)\n", len(rep.Inexact))
		return exitWhatIfError
	case rep.Flips > 0:
		return exitWhatIfFlips
	}
	return exitWhatIfSame
}

// printWhatIf is the report for a human, whatever a caller supplied
// escaped for the terminal.
func printWhatIf(w io.Writer, rep api.WhatIfReport) {
	fmt.Fprintf(w, "replayed %d recorded decisions from %s to %s: %d flip\n", rep.Replayed,
		rep.Since.Local().Format("2006-01-02 15:04"), rep.Until.Local().Format("2006-01-02 15:04"), rep.Flips)
	fmt.Fprintf(w, "  %d verified exact on today's cards, %d made on cards since changed (%d of them already decided otherwise today), %d recorded without a wallet revision, %d not decided by cards\n",
		rep.Verified, rep.Stale, rep.ChangedSince, rep.Unversioned, rep.Skipped)
	if rep.Partial > 0 {
		// A record that cut a list of its decisions (more rewrites or
		// directories than a record keeps): what it cut could flip too.
		fmt.Fprintf(w, "  %d replayed only in part: their records cut a list of decisions (before_rewrite_truncated, fs_truncated), and what was cut is not replayed\n", rep.Partial)
	}
	for _, ex := range rep.Inexact {
		fmt.Fprintf(w, "INEXACT  #%d %s: recorded %s, replayed %s\n", ex.Seq, terminalSafe(ex.Target), decisionWords(ex.Recorded), decisionWords(ex.Before))
	}
	for _, g := range rep.Groups {
		fmt.Fprintf(w, "\nagent %s, tool %s: %d allowed -> denied, %d denied -> allowed\n",
			terminalSafe(g.Agent), terminalSafe(g.Tool), g.AllowedToDenied, g.DeniedToAllowed)
		for _, ex := range g.Examples {
			way := "allowed -> denied"
			if ex.After.Allow {
				way = "denied -> allowed"
			}
			fmt.Fprintf(w, "  #%d %s  %s  %s\n    now: %s\n    after: %s\n", ex.Seq, ex.At.Local().Format("2006-01-02 15:04:05"), way,
				terminalSafe(ex.Target), decisionWords(ex.Before), decisionWords(ex.After))
		}
	}
}

// decisionWords is a decision in one line: allowed by which rule, or the
// denial's rule.
func decisionWords(d api.Decision) string {
	verdict := "denied"
	if d.Allow {
		verdict = "allowed"
	}
	if d.Rule == "" {
		return verdict
	}
	return verdict + " (" + terminalSafe(d.Rule) + ")"
}
