package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/grant"
)

// This file is the operator's side of permission cards (docs/cards.md): grant,
// derive, revoke, list and show, on the state store of agent.toml.

const grantSyntaxHelp = `GRANT is "class:verb resource", quoted in the shell: 'tool:invoke weather --city=Par*'
(the tool and its arguments, * a glob inside a value, a trailing --... for any further
arguments), 'network:connect api.example.com', 'secret:use API_KEY', 'card:revoke *'.`

const cardsGrantHelp = `Installs a new card in agent NAME's wallet (NAME declared in agent.toml). By default the
GRANTs are the card's lower-positive grants: what it allows.
  -ceiling  the GRANTs are upper-positive grants instead: a ceiling over the agent's whole
            wallet (every call must then be under one of them, whatever other cards allow);
            the card allows nothing by itself.
  -deny     the GRANTs are upper-negative grants: a prohibition over the whole wallet that no
            other card overrides; the card allows nothing by itself. A prohibition matches
            arguments as an allowance does: 'tool:invoke greet --...' forbids every call of
            greet, 'tool:invoke greet' only one without arguments. A tool GRANT that no call
            the tool's input schema accepts can match is refused (it would forbid nothing),
            one that a call escapes by adding an argument is granted with a warning.
-expires makes the card stop counting after that long (default: never).
-budget limits how much the card (and every card derived from it) may be used:
calls=N,wall_ms=N,bytes_out=N,cost=N, any subset (calls allowed, milliseconds they ran,
bytes they sent through http-fetch, cost units: each call costs its tool's cost key in
agent.toml, 1 by default). A call that would go over is denied (budget-exhausted).
Prints the card's ID (-json: {"id": ID}).

Before it installs the card it prints what the card would newly allow (to stderr with -json):
each GRANT in words against what the agent's wallet allows today ("tool:invoke pay with any
--to= (today only --to=alice)"; "nothing new: ..." for a grant the wallet covers already, and
"redundant" when every GRANT is), and the agent's recorded calls of the last 7 days that were
refused or asked a human and that the card would have allowed (maiden audit whatif's replay).
-dry-run prints that and installs nothing (exit 0); with -json it prints the summary as JSON:
{"since", "until", "beyond", "redundant", "calls", "examples"}. A -deny or -ceiling card
allows nothing new: nothing is printed for it (-dry-run says so).

` + grantSyntaxHelp + "\n\n" + stateExitHelp

const cardsDeriveHelp = `Derives a card from card ID into agent NAME's wallet: attenuation only (docs/cards.md,
Derivation). The child allows the GRANTs, each of which must be under one of the parent's
lower-positive grants (else lower-bound-too-broad); it keeps the parent's negative grants and
its ceiling (upper-bound-too-broad otherwise) and expires with the parent, or earlier with
-expires (card-expired if the parent has expired or the child would outlive it). Revoking the
parent revokes the child. -budget calls=N,wall_ms=N,bytes_out=N,cost=N gives the child budgets:
each at most what the parent and every ancestor have left (budget-too-broad otherwise); one of
theirs the child does not name is given what they have left. Spending on the child spends its
ancestors too. Prints the child's ID (-json: {"id": ID}).

` + grantSyntaxHelp + "\n\n" + stateExitHelp

const cardsRevokeHelp = `Revokes card ID and every card derived from it, transitively, in one transaction, and
says how many cards that was (-json: {"revoked": N}). Revoking a revoked card is card-revoked.
A system card (a grant of agent.toml) is revoked too, but the next maiden command or load of
agent.toml installs its grant again as a new card: remove the grant from agent.toml to end it.

` + stateExitHelp

const cardsLsHelp = `Lists the cards in the state store (of agent NAME with -agent), revoked and expired ones
included, in the order they were made: ID, holder, state, expiry, parents and grants.
-json: a list of cards as "maiden cards show -json" prints them.

` + stateExitHelp

const cardsShowHelp = `Prints card ID: holder, state (live, revoked or expired), whether it is a system card
(from agent.toml), who made it, its parents, expiry, its four grant lists and each budget's
limit, spent (by the card and the cards derived from it) and left.
-json: {"id", "agent", "parents", "lower_positive", "lower_negative", "upper_positive",
"upper_negative", "expires", "budgets": [{"key", "limit", "spent", "left"}], "system",
"manager", "created", "revoked", "state"}.

` + stateExitHelp

// parseGrants parses the GRANT arguments; a malformed one is reported with
// its column and what was expected there, under the argument itself.
func parseGrants(stderr io.Writer, name string, args []string) ([]grant.Grant, bool) {
	gs := make([]grant.Grant, 0, len(args))
	for i, a := range args {
		g, err := grant.Parse(a)
		if err != nil {
			fmt.Fprintf(stderr, "maiden %s: GRANT %d: %v\n", name, i+1, err)
			var pe *grant.ParseError
			if errors.As(err, &pe) && pe.Pos <= len(a) && !strings.ContainsAny(a, "\n\t") {
				fmt.Fprintf(stderr, "  %s\n  %s^\n", a, strings.Repeat(" ", len([]rune(a[:pe.Pos]))))
			}
			return nil, false
		}
		gs = append(gs, g)
	}
	return gs, true
}

// expiryFlag is -expires: a duration from now, or unset.
type expiryFlag struct{ d time.Duration }

func (f *expiryFlag) String() string {
	if f.d == 0 {
		return ""
	}
	return f.d.String()
}

func (f *expiryFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("a duration such as 30m, 24h or 168h: %v", err)
	}
	if d <= 0 {
		return fmt.Errorf("must be positive, got %s", s)
	}
	f.d = d
	return nil
}

func (f *expiryFlag) at(now time.Time) time.Time {
	if f.d == 0 {
		return time.Time{}
	}
	return now.Add(f.d)
}

func printID(stdout io.Writer, asJSON bool, id, text string) {
	if asJSON {
		printJSON(stdout, struct {
			ID string `json:"id"`
		}{id})
		return
	}
	fmt.Fprintln(stdout, text)
}

func cmdCardsGrant(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("cards grant", stderr)
	agent := fs.String("agent", "", "the agent `NAME` whose wallet gets the card (required)")
	var exp expiryFlag
	fs.Var(&exp, "expires", "the card stops counting after `DURATION` (e.g. 24h; default: never)")
	deny := fs.Bool("deny", false, "the GRANTs are a wallet-wide prohibition (upper-negative)")
	ceiling := fs.Bool("ceiling", false, "the GRANTs are a wallet-wide ceiling (upper-positive)")
	budget := fs.String("budget", "", "the card's `BUDGETS`: calls=N,wall_ms=N,bytes_out=N,cost=N (any subset)")
	dryRun := fs.Bool("dry-run", false, "print what the card would newly allow and install nothing")
	asJSON := fs.Bool("json", false, `print {"id": ID} (with -dry-run: the summary as JSON)`)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	switch {
	case *agent == "" || len(pos) == 0:
		fmt.Fprintln(stderr, "usage: maiden cards grant -agent NAME [-budget calls=N,wall_ms=N,bytes_out=N,cost=N] [-dry-run] [-expires 24h] [-deny | -ceiling] [-json] GRANT...")
		return exitUsage
	case *deny && *ceiling:
		fmt.Fprintln(stderr, "maiden cards grant: -deny and -ceiling exclude each other (grant them as two cards)")
		return exitUsage
	}
	gs, ok := parseGrants(stderr, "cards grant", pos)
	if !ok {
		return exitUsage
	}
	spec := admin.CardSpec{Expires: exp.at(time.Now()), Budget: *budget}
	switch {
	case *ceiling:
		spec.Ceiling = pos
	case *deny:
		spec.Forbid = pos
	default:
		spec.Allow = pos
	}
	s, code := c.openState(ctx, stderr)
	if s == nil {
		return code
	}
	defer s.close()
	if err := s.declared(*agent); err != nil {
		return failed(stderr, "cards grant", err)
	}
	if *deny {
		if code := checkDenials(ctx, c, *agent, pos, gs, stderr); code != exitOK {
			return code
		}
	}
	// What the card would newly allow, before it is installed.
	var np api.NewlyPossible
	if !*deny && !*ceiling {
		if np, err = s.st.NewlyPossible(ctx, *agent, pos, "", time.Now().Add(-admin.DefaultWhatIfWindow)); err != nil {
			return failed(stderr, "cards grant", err)
		}
	}
	summary := stdout
	if *asJSON {
		summary = stderr // stdout is {"id": ID}, which scripts read
	}
	switch {
	case *dryRun && *asJSON:
		printJSON(stdout, np)
		return exitOK
	case *deny || *ceiling:
		if *dryRun {
			fmt.Fprintln(summary, "a prohibition or a ceiling allows nothing new")
		}
	default:
		printNewly(summary, np, fmt.Sprintf("agent %q's wallet", *agent))
	}
	if *dryRun {
		fmt.Fprintln(summary, "dry run: no card was installed")
		return exitOK
	}
	card, err := s.st.Grant(ctx, *agent, spec)
	if err != nil {
		return failed(stderr, "cards grant", err)
	}
	printID(stdout, *asJSON, card.ID, fmt.Sprintf("card %s granted to agent %q%s%s", card.ID, *agent, expiresText(card), budgetText(card)))
	return exitOK
}

func cmdCardsDerive(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("cards derive", stderr)
	to := fs.String("to", "", "the agent `NAME` whose wallet gets the child (required)")
	var exp expiryFlag
	fs.Var(&exp, "expires", "the child stops counting after `DURATION` (default: with its parent)")
	budget := fs.String("budget", "", "the child's `BUDGETS`: calls=N,wall_ms=N,bytes_out=N,cost=N (at most what the parent has left)")
	asJSON := fs.Bool("json", false, `print {"id": ID}`)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if *to == "" || len(pos) < 2 {
		fmt.Fprintln(stderr, "usage: maiden cards derive ID -to NAME [-budget calls=N,wall_ms=N,bytes_out=N,cost=N] [-expires 1h] [-json] GRANT...")
		return exitUsage
	}
	if _, ok := parseGrants(stderr, "cards derive", pos[1:]); !ok {
		return exitUsage
	}
	s, code := c.openState(ctx, stderr)
	if s == nil {
		return code
	}
	defer s.close()
	if err := s.declared(*to); err != nil {
		return failed(stderr, "cards derive", err)
	}
	card, err := s.st.Derive(ctx, pos[0], *to, pos[1:], exp.at(time.Now()), *budget)
	if err != nil {
		return failed(stderr, "cards derive", err)
	}
	printID(stdout, *asJSON, card.ID, fmt.Sprintf("card %s derived from %s for agent %q%s%s", card.ID, pos[0], *to, expiresText(card), budgetText(card)))
	return exitOK
}

func cmdCardsRevoke(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("cards revoke", stderr)
	asJSON := fs.Bool("json", false, `print {"revoked": N}`)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: maiden cards revoke ID [-json]")
		return exitUsage
	}
	s, code := c.openState(ctx, stderr)
	if s == nil {
		return code
	}
	defer s.close()
	n, err := s.st.Revoke(ctx, pos[0])
	if err != nil {
		return failed(stderr, "cards revoke", err)
	}
	if *asJSON {
		printJSON(stdout, struct {
			Revoked int `json:"revoked"`
		}{n})
		return exitOK
	}
	switch n {
	case 1:
		fmt.Fprintf(stdout, "revoked 1 card: %s (no card was derived from it)\n", pos[0])
	default:
		fmt.Fprintf(stdout, "revoked %d cards: %s and the %d derived from it\n", n, pos[0], n-1)
	}
	return exitOK
}

// cardView is a card as ls and show print it.
type cardView struct {
	api.Card
	State string `json:"state"` // live, revoked or expired
}

func view(c api.Card, now time.Time) cardView {
	state := "live"
	switch {
	case !c.Revoked.IsZero():
		state = "revoked"
	case c.ExpiredAt(now):
		state = "expired"
	}
	return cardView{c, state}
}

func expiresText(c api.Card) string {
	if c.Expires.IsZero() {
		return ""
	}
	return ", expires " + c.Expires.Local().Format(time.DateTime)
}

// budgetText is ", budget calls=N,..." for a card with budgets.
func budgetText(c api.Card) string {
	if len(c.Budgets) == 0 {
		return ""
	}
	parts := make([]string, len(c.Budgets))
	for i, b := range c.Budgets {
		parts[i] = fmt.Sprintf("%s=%d", b.Key, b.Limit)
	}
	return ", budget " + strings.Join(parts, ",")
}

// budgetLines are a card's budgets as show prints them: the key, what is
// left of the limit and what was spent.
func budgetLines(c api.Card) []string {
	out := make([]string, len(c.Budgets))
	for i, b := range c.Budgets {
		out[i] = fmt.Sprintf("%-9s %d left of %d (%d spent)", b.Key, b.Left, b.Limit, b.Spent)
	}
	return out
}

// grantLists names a card's non-empty grant lists, escaped for the
// terminal: a grant can hold what an agent wrote (an always-card is the
// approved call's rendering, whose quoted values keep control and bidi
// characters; a derived card's grants are the deriving agent's text).
func grantLists(c api.Card) [][2]string {
	var out [][2]string
	for _, l := range []struct {
		name string
		gs   []api.CardGrant
	}{{"allows", c.LowerPos}, {"except", c.LowerNeg}, {"ceiling", c.UpperPos}, {"forbids", c.UpperNeg}} {
		if len(l.gs) == 0 {
			continue
		}
		s := make([]string, len(l.gs))
		for i, g := range l.gs {
			s[i] = g.String()
		}
		out = append(out, [2]string{l.name, terminalSafe(strings.Join(s, "; "))})
	}
	return out
}

func cmdCardsLs(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("cards ls", stderr)
	agent := fs.String("agent", "", "only the cards of agent `NAME`")
	asJSON := fs.Bool("json", false, "print JSON: a list of cards")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "maiden cards ls: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	s, code := c.openState(ctx, stderr)
	if s == nil {
		return code
	}
	defer s.close()
	if *agent != "" {
		if err := s.declared(*agent); err != nil {
			// An agent removed from agent.toml may still hold cards.
			known, lerr := s.st.Agents(ctx)
			if lerr != nil {
				return failed(stderr, "cards ls", lerr)
			}
			found := false
			for _, a := range known {
				found = found || a.Name == *agent
			}
			if !found {
				return failed(stderr, "cards ls", err)
			}
		}
	}
	list, err := s.st.Cards(ctx, *agent)
	if err != nil {
		return failed(stderr, "cards ls", err)
	}
	now := time.Now()
	views := make([]cardView, len(list))
	for i, card := range list {
		views[i] = view(card, now)
	}
	if *asJSON {
		printJSON(stdout, views)
		return exitOK
	}
	if len(views) == 0 {
		fmt.Fprintln(stdout, "no cards")
	}
	for _, v := range views {
		var extra []string
		if v.System {
			extra = append(extra, "system")
		}
		if len(v.Parents) > 0 {
			extra = append(extra, "from "+strings.Join(v.Parents, ", "))
		}
		if !v.Expires.IsZero() {
			extra = append(extra, "expires "+v.Expires.Local().Format(time.DateTime))
		}
		fmt.Fprintln(stdout, strings.TrimRight(fmt.Sprintf("%s  %-12s %-8s %s", v.ID, v.Holder, v.State, strings.Join(extra, ", ")), " "))
		for _, l := range grantLists(v.Card) {
			fmt.Fprintf(stdout, "    %-8s %s\n", l[0]+":", l[1])
		}
		for _, l := range budgetLines(v.Card) {
			fmt.Fprintf(stdout, "    %-8s %s\n", "budget:", l)
		}
	}
	return exitOK
}

func cmdCardsShow(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("cards show", stderr)
	asJSON := fs.Bool("json", false, "print the card as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: maiden cards show ID [-json]")
		return exitUsage
	}
	s, code := c.openState(ctx, stderr)
	if s == nil {
		return code
	}
	defer s.close()
	card, err := s.st.Card(ctx, pos[0])
	if err != nil {
		return failed(stderr, "cards show", err)
	}
	v := view(card, time.Now())
	if *asJSON {
		printJSON(stdout, v)
		return exitOK
	}
	fmt.Fprintf(stdout, "card     %s\nagent    %s\nstate    %s", v.ID, v.Holder, v.State)
	if !v.Revoked.IsZero() {
		fmt.Fprintf(stdout, " (revoked %s)", v.Revoked.Local().Format(time.DateTime))
	}
	fmt.Fprintln(stdout)
	kind := "made by " + v.Manager
	if v.System {
		kind = "system card (a grant of agent.toml; only the operator revokes it)"
	}
	fmt.Fprintf(stdout, "kind     %s\ncreated  %s\n", kind, v.Created.Local().Format(time.DateTime))
	if len(v.Parents) > 0 {
		fmt.Fprintf(stdout, "parents  %s\n", strings.Join(v.Parents, ", "))
	}
	if v.Expires.IsZero() {
		fmt.Fprintln(stdout, "expires  never")
	} else {
		fmt.Fprintf(stdout, "expires  %s\n", v.Expires.Local().Format(time.DateTime))
	}
	for _, l := range grantLists(v.Card) {
		fmt.Fprintf(stdout, "%-8s %s\n", l[0], l[1])
	}
	for i, l := range budgetLines(v.Card) {
		label := ""
		if i == 0 {
			label = "budget"
		}
		fmt.Fprintf(stdout, "%-8s %s\n", label, l)
	}
	return exitOK
}

// checkDenials checks the tool grants of a -deny card against the agent's
// tools before it is installed. A prohibiting grant matches a call argument
// by argument exactly as an allowing one does (docs/cards.md, "Prohibiting
// a tool"): 'tool:invoke greet' forbids only a call of greet without
// arguments, and 'tool:invoke greet --...' every call of greet. A grant that
// no call the tool's input schema accepts can match forbids nothing, which
// is never what the operator meant: it is refused, naming the --... form. A
// grant that a call escapes by adding an argument is installed with a
// warning that names the argument and the --... form.
func checkDenials(ctx context.Context, c *common, agent string, texts []string, gs []grant.Grant, stderr io.Writer) int {
	var h *maiden.Host
	defer func() {
		if h != nil {
			h.Close(context.Background())
		}
	}()
	for i, g := range gs {
		if g.Class != grant.Tool {
			continue
		}
		// A prohibition is a safety measure: when the tools cannot be
		// read, it is installed unchecked rather than refused.
		var err error
		if h == nil {
			if h, err = c.host(stderr); err != nil {
				h = nil
				fmt.Fprintf(stderr, "maiden cards grant: warning: GRANT %d %q not checked against the tools of agent %q: %v\n", i+1, texts[i], agent, err)
				continue
			}
		}
		reach, err := h.GrantReach(ctx, agent, g.String())
		if err != nil {
			fmt.Fprintf(stderr, "maiden cards grant: warning: GRANT %d %q not checked against the tools of agent %q: %v\n", i+1, texts[i], agent, err)
			continue
		}
		wide := g.WithRest().String()
		fix := fmt.Sprintf("maiden cards grant -agent %s -deny %s", shellQuote(agent), shellQuote(wide))
		never, escapes, commands := 0, []string(nil), []string(nil)
		for _, r := range reach {
			if r.Never != "" {
				never++
			}
			if r.Escapes != "" {
				escapes = append(escapes, fmt.Sprintf("a call of %s that also passes %s", r.Tool, r.Escapes))
			}
			if r.Command {
				commands = append(commands, r.Tool)
			}
		}
		switch {
		case len(reach) > 0 && never == len(reach):
			fmt.Fprintf(stderr, "maiden cards grant: GRANT %d %q would forbid nothing: no call of %s can match it: %s.\n", i+1, texts[i], reach[0].Tool, reach[0].Never)
			for _, r := range reach[1:] {
				fmt.Fprintf(stderr, "  nor of %s: %s\n", r.Tool, r.Never)
			}
			fmt.Fprintf(stderr, "A prohibition matches a call's arguments exactly as an allowing grant does; to forbid every call whatever its arguments:\n  %s\n", fix)
			return exitUsage
		case len(escapes) > 0:
			fmt.Fprintf(stderr, "maiden cards grant: warning: GRANT %d %q forbids only calls whose arguments it all names: %s is not forbidden; to forbid those too:\n  %s\n",
				i+1, texts[i], strings.Join(escapes, " or "), fix)
		case len(reach) == 0:
			fmt.Fprintf(stderr, "maiden cards grant: warning: GRANT %d %q names no tool bound to agent %q\n", i+1, texts[i], agent)
		}
		if len(commands) > 0 {
			fmt.Fprintf(stderr, "maiden cards grant: warning: GRANT %d %q: %s %s a typed command: the grant forbids only calls of exactly the command words it names, other options only with --..., other positionals only with -- ... (docs/command-model.md)\n",
				i+1, texts[i], strings.Join(commands, ", "), map[bool]string{true: "is", false: "are"}[len(commands) == 1])
		}
	}
	return exitOK
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var _ flag.Value = (*expiryFlag)(nil)
