package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/safetext"
)

// This file is `maiden pending`: the calls that wait for a human. What it
// prints comes from agents (tool arguments, reasons a middleware quotes),
// so every such text goes through terminalSafe before it reaches a
// terminal: an agent must not be able to move the cursor, clear the screen,
// retitle the window or reverse the text a human reads before approving.

const pendingHelp = `Lists the approval requests waiting for a human's decision, oldest first: request ID,
agent, tool, the arguments as rendered (what "maiden approve ID" lets run), the reason the
rule that asked gave, and how long until the request expires (expiry is a denial).
Control characters and bidirectional overrides in what agents supplied are shown escaped.
Sessions' requests to widen their sandbox boundary (request_sandbox_boundary) are listed
beside them: tool request_sandbox_boundary, the expansion as JSON for arguments, and the
agent's justification for reason; their IDs start with bnd_.

With -json: an array (empty when nothing waits) of objects with exactly the keys
"id", "agent", "tool", "rendered", "reason", "created" and "expires" (RFC 3339 times).

"maiden pending ID" shows one request in any state, with everything there is to decide on:
its state (and who decided, why), agent, session, tool, arguments, the SHA-256 of their
rendering (the inbox page shows the same), the input's SHA-256, the
hosts the call may reach and the credential names it may spend (the tool's policy as the
agent's binding narrows it), the rule that asked and why, its expiry, and whether it may be
approved always. A pending request that may be approved always, or a boundary request, is
followed by what approving it would newly allow: the always-card's grant (or the expansion) in
words against what the agent's wallet (or the session's boundary) allows today, and the
recorded calls of the last 7 days that were refused or asked a human and that it would have
let through (the inbox page shows the same). With -json: the whole request as the inbox page
sees it.

Exit codes: 0 done (also when nothing waits); 2 bad command line or agent.toml; 1 the state
store failed.`

// pendingEntry is one request as pending -json prints it: exactly these
// keys (scripts depend on them).
type pendingEntry struct {
	ID       string    `json:"id"`
	Agent    string    `json:"agent"`
	Tool     string    `json:"tool"`
	Rendered string    `json:"rendered"`
	Reason   string    `json:"reason"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
}

func cmdPending(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("pending", stderr)
	asJSON := fs.Bool("json", false, `print a JSON array of {"id", "agent", "tool", "rendered", "reason", "created", "expires"}`)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "maiden pending: unexpected argument %q\n", pos[1])
		return exitUsage
	}
	s, code := c.openStateFor(ctx, stderr, true)
	if s == nil {
		return code
	}
	defer s.close()
	if len(pos) == 1 {
		return showApproval(ctx, s, pos[0], *asJSON, stdout, stderr)
	}
	now := time.Now()
	list, err := s.st.Pending(ctx, now)
	if err != nil {
		return failed(stderr, "pending", err)
	}
	if *asJSON {
		out := make([]pendingEntry, len(list))
		for i, r := range list {
			out[i] = pendingEntry{ID: r.ID, Agent: r.Agent, Tool: r.Tool, Rendered: r.Rendered, Reason: r.Reason, Created: r.Created, Expires: r.Expires}
		}
		printJSON(stdout, out)
		return exitOK
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no approval requests are waiting")
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAGENT\tTOOL\tRENDERED\tREASON\tEXPIRES IN")
	for _, r := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", terminalSafe(r.ID), terminalSafe(r.Agent), terminalSafe(r.Tool),
			orDash(terminalSafe(r.Rendered)), orDash(terminalSafe(r.Reason)), expiresIn(r.Expires, now))
	}
	tw.Flush()
	// -always installs a card for a tool call; a boundary request has none
	// to install (maiden approve -always refuses it).
	approve := "maiden approve ID [-always]"
	if slices.ContainsFunc(list, func(r api.ApprovalRequest) bool { return r.Kind == api.RequestBoundary }) {
		approve = "maiden approve ID (-always: tool calls only, not boundary requests)"
	}
	fmt.Fprintf(stdout, "\ndecide with: %s   or   maiden deny ID [-reason TEXT]\n", approve)
	return exitOK
}

// showApproval prints one request, in any state, with everything a human
// needs to decide it.
func showApproval(ctx context.Context, s *operatorState, id string, asJSON bool, stdout, stderr io.Writer) int {
	r, err := s.st.Approval(ctx, id)
	if errors.Is(err, admin.ErrUnknownApproval) {
		fmt.Fprintf(stderr, "maiden pending: no approval request %s in %s\n", terminalSafe(strconv.Quote(id)), s.path)
		return exitUsage
	}
	if err != nil {
		return failed(stderr, "pending", err)
	}
	if asJSON {
		printJSON(stdout, r)
		return exitOK
	}
	state := r.State
	if r.DecidedBy != "" {
		state += " by " + terminalSafe(r.DecidedBy) + " at " + r.Decided.Local().Format(time.DateTime)
	}
	if r.DecisionReason != "" {
		state += ": " + terminalSafe(r.DecisionReason)
	}
	if r.Kind == api.RequestBoundary {
		showBoundaryRequest(r, state, stdout)
		showNewly(ctx, s, r, stdout)
		return exitOK
	}
	list := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return terminalSafe(strings.Join(l, ", "))
	}
	always := "may be approved always, installing " + terminalSafe(strconv.Quote(r.AlwaysGrant))
	if !r.AllowAlways {
		always = "may not be approved always (allow_always = false)"
	}
	// What the approval is bound to besides the call: the tool's code and
	// its policy as the call asked (a request made before maiden recorded
	// them releases nothing).
	code, limits := "not recorded: an approval of it runs nothing", "-"
	if r.ToolDigest != "" {
		code = terminalSafe(r.ToolDigest)
	}
	if p := r.Policy; p != nil {
		limits = fmt.Sprintf("timeout %d ms, memory %d MB", p.TimeoutMS, p.MemoryMB)
	}
	now := time.Now()
	for _, l := range [][2]string{
		{"request", terminalSafe(r.ID)},
		{"state", state},
		{"agent", terminalSafe(r.Agent)},
		{"session", orDash(terminalSafe(r.Session))},
		{"tool", terminalSafe(r.Tool)},
		{"arguments", orDash(terminalSafe(r.Rendered))},
		{"rendering", "sha256:" + grant.RenderingDigest(r.Rendered) + " (the inbox page shows the same)"},
		{"input", "sha256:" + terminalSafe(r.Digest)},
		{"hosts", list(r.Hosts)},
		{"secrets", list(r.Secrets)},
		{"code", code},
		{"limits", limits},
		{"asked by", terminalSafe(r.Rule)},
		{"reason", orDash(terminalSafe(r.Reason))},
		{"created", r.Created.Local().Format(time.DateTime)},
		{"expires", r.Expires.Local().Format(time.DateTime) + " (" + expiresIn(r.Expires, now) + ")"},
		{"always", always},
	} {
		fmt.Fprintf(stdout, "%-10s %s\n", l[0], l[1])
	}
	if r.AllowAlways {
		showNewly(ctx, s, r, stdout)
	}
	return exitOK
}

// showNewly prints, for a pending request, what approving it would newly
// allow: its always-card's grant against the agent's wallet, or a boundary
// request's expansion against the session's boundary, and the recorded
// calls of the last 7 days it would have let through.
func showNewly(ctx context.Context, s *operatorState, r api.ApprovalRequest, stdout io.Writer) {
	if r.State != "pending" {
		return
	}
	np, err := s.st.ApprovalNewlyPossible(ctx, r.ID, "", time.Now().Add(-admin.DefaultWhatIfWindow))
	fmt.Fprintln(stdout)
	if err != nil {
		fmt.Fprintf(stdout, "what approving would newly allow could not be worked out: %s\n", terminalSafe(err.Error()))
		return
	}
	against := fmt.Sprintf("agent %s's wallet (approving always installs %s)", terminalSafe(strconv.Quote(r.Agent)), terminalSafe(strconv.Quote(r.AlwaysGrant)))
	if r.Kind == api.RequestBoundary {
		against = "session " + terminalSafe(r.Session) + "'s boundary"
	}
	printNewly(stdout, np, against)
}

// showBoundaryRequest prints a session's request to widen its sandbox
// boundary (request_sandbox_boundary).
func showBoundaryRequest(r api.ApprovalRequest, state string, stdout io.Writer) {
	now := time.Now()
	for _, l := range [][2]string{
		{"request", terminalSafe(r.ID) + " (a sandbox boundary request; " + terminalSafe(r.Rule) + ")"},
		{"state", state},
		{"agent", terminalSafe(r.Agent)},
		{"session", terminalSafe(r.Session)},
		{"expansion", terminalSafe(r.Rendered)},
		{"revision", strconv.FormatInt(r.Revision, 10)},
		{"why", orDash(terminalSafe(r.Reason))},
		{"created", r.Created.Local().Format(time.DateTime)},
		{"expires", r.Expires.Local().Format(time.DateTime) + " (" + expiresIn(r.Expires, now) + ")"},
	} {
		fmt.Fprintf(stdout, "%-10s %s\n", l[0], l[1])
	}
	fmt.Fprintln(stdout, "\napproving widens this session's boundary only (a new revision); maiden deny ID -reason TEXT tells the agent why not")
}

// printNewly prints what a grant or a boundary expansion would newly
// allow (admin's NewlyPossible): each grant in words against today's
// wallet or boundary (against), then the recorded calls of the window it
// would have let through, everything agents supplied escaped.
func printNewly(w io.Writer, np api.NewlyPossible, against string) {
	if np.Redundant {
		fmt.Fprintf(w, "redundant: %s allows all of it already\n", against)
	} else {
		fmt.Fprintf(w, "what would newly be possible, beyond what %s allows today:\n", against)
	}
	for _, l := range np.Beyond {
		fmt.Fprintf(w, "  %s\n", terminalSafe(l))
	}
	window := windowWords(np.Until.Sub(np.Since))
	if np.NotReplayable > 0 {
		// Said first, so that "none" below is never read as the whole
		// answer.
		defer fmt.Fprintf(w, "%d more recorded calls of the window could not be replayed (%s)\n", np.NotReplayable, terminalSafe(np.NotReplayableWhy))
	}
	switch np.Calls {
	case 0:
		fmt.Fprintf(w, "of the calls recorded in the last %s, none refused or asked would have been allowed\n", window)
		return
	case 1:
		fmt.Fprintf(w, "of the calls recorded in the last %s, 1 refused or asked would have been allowed:\n", window)
	default:
		fmt.Fprintf(w, "of the calls recorded in the last %s, %d refused or asked would have been allowed:\n", window, np.Calls)
	}
	for _, ex := range np.Examples {
		was := "refused"
		if ex.Recorded.Rule == api.RuleAsked {
			was = "asked a human"
		}
		fmt.Fprintf(w, "  #%d %s  %s  %s (%s)\n", ex.Seq, ex.At.Local().Format(time.DateTime), terminalSafe(ex.Agent), terminalSafe(ex.Target), was)
	}
	if n := np.Calls - len(np.Examples); n > 0 {
		fmt.Fprintf(w, "  and %d more (maiden audit whatif lists them by tool)\n", n)
	}
}

// windowWords is a window as "7 days", "36h0m0s".
func windowWords(d time.Duration) string {
	day := 24 * time.Hour
	if d >= day && d%day < time.Minute {
		if n := int(d / day); n != 1 {
			return strconv.Itoa(n) + " days"
		}
		return "day"
	}
	return d.Round(time.Second).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// expiresIn is how long until t, to the second (minutes for longer).
func expiresIn(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d <= 0:
		return "expired"
	case d < time.Minute:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}

// terminalSafe escapes what must not reach a terminal raw from text an
// agent supplied (control characters, escape sequences, bidirectional and
// zero-width controls, invalid UTF-8): safetext.Escape, the escaping the
// inbox page shares, so both show the same characters for the same call.
func terminalSafe(s string) string { return safetext.Escape(s) }
