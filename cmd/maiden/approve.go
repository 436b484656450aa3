package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
)

// This file is `maiden approve` and `maiden deny`: a human's decision on an
// approval request, recorded in the state store this command opens itself
// (with its audit record, by "cli:" and the OS user). The call that waits
// for it in a maiden serve process sees it at its next poll of the store.
// Whoever can run this command on the store file is an operator: agents
// reach no such command (their tokens decide nothing).

const approveHelp = `Approves approval request ID (from "maiden pending"): the call it holds runs once, when
its agent makes it again or, if it is still waiting, at once. With -always the agent's wallet
also gets a card (approve:always TOOL ARGS, the approved call exactly, or -grant's edited
text) so the same call does not ask again; "maiden cards ls" lists it and "maiden cards
revoke ID" ends it. A rule declared allow_always = false refuses -always.
A sandbox boundary request (ID bnd_...) is approved by applying its expansion to its
session's boundary as a new revision (or it ends in conflict with an explicit deny or a
protected name: see "maiden pending ID"); it has no -always.

Exit codes: 0 approved; 2 bad command line, or an ID that is unknown or not pending any more
(already approved, denied, expired; the message says which); 6 -always refused (the rule
forbids it, or -grant does not cover the approved call), nothing decided; 1 the state store
failed (or the request was approved but the always-card could not be installed).`

const denyHelp = `Denies approval request ID (from "maiden pending"): the waiting call returns kind denied
with -reason, and the same call by the same agent is refused until the request's expiry
without asking again. A sandbox boundary request (ID bnd_...) denied: the session's waiting
request_sandbox_boundary call fails with the structured error, status denied and -reason.

Exit codes: 0 denied; 2 bad command line, or an ID that is unknown or not pending any more
(the message says which); 1 the state store failed.`

func cmdApprove(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("approve", stderr)
	always := fs.Bool("always", false, "also install a card that pre-approves the same call from now on (revocable)")
	grantText := fs.String("grant", "", "with -always: the card's `GRANT`, edited from the default (approve:always TOOL ARGS; it must cover the approved call)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: maiden approve ID [-always [-grant GRANT]]")
		return exitUsage
	}
	if *grantText != "" && !*always {
		fmt.Fprintln(stderr, "maiden approve: -grant edits the card -always installs; give -always too")
		return exitUsage
	}
	return decide(ctx, c, "approve", pos[0], admin.Answer{Approve: true, Always: *always, Grant: *grantText}, stdout, stderr)
}

func cmdDeny(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("deny", stderr)
	reason := fs.String("reason", "", "why, in a `TEXT` the agent is shown with the denial")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: maiden deny ID [-reason TEXT]")
		return exitUsage
	}
	return decide(ctx, c, "deny", pos[0], admin.Answer{Reason: *reason}, stdout, stderr)
}

// decide records d on request id and says what was decided.
func decide(ctx context.Context, c *common, name, id string, d admin.Answer, stdout, stderr io.Writer) int {
	s, code := c.openStateFor(ctx, stderr, true)
	if s == nil {
		return code
	}
	defer s.close()
	d.By = "cli:" + osUser()
	r, err := s.st.Decide(ctx, id, d)
	switch {
	case errors.Is(err, admin.ErrUnknownApproval):
		fmt.Fprintf(stderr, "maiden %s: no approval request %s in %s (\"maiden pending\" lists the waiting ones)\n", name, terminalSafe(strconv.Quote(id)), s.path)
		return exitUsage
	case errors.Is(err, admin.ErrApprovalDecided) && r.State != "pending":
		fmt.Fprintf(stderr, "maiden %s: approval request %s is %s%s, not pending: nothing changed\n", name, terminalSafe(id), r.State, decidedBy(r))
		return exitUsage
	case errors.Is(err, admin.ErrApprovalDecided):
		// It expired, or another process decided it, since it was read.
		fmt.Fprintf(stderr, "maiden %s: approval request %s: %s: nothing changed\n", name, terminalSafe(id), terminalSafe(err.Error()))
		return exitUsage
	case errors.Is(err, admin.ErrAlwaysRefused):
		fmt.Fprintf(stderr, "maiden %s: %s: nothing decided\n", name, terminalSafe(err.Error()))
		return exitDenied
	case err != nil && r.State == "approved":
		fmt.Fprintf(stderr, "maiden %s: %s\n", name, terminalSafe(err.Error()))
		return exitState
	case err != nil:
		fmt.Fprintf(stderr, "maiden %s: approval request %s: %s\n", name, terminalSafe(id), terminalSafe(err.Error()))
		return exitState
	}
	call := terminalSafe(r.Tool)
	if r.Rendered != "" {
		call += " " + terminalSafe(r.Rendered)
	}
	if d.Approve {
		fmt.Fprintf(stdout, "approved %s: agent %q may run %s once\n", r.ID, r.Agent, call)
		if d.Always {
			g := d.Grant
			if g == "" {
				g = r.AlwaysGrant
			}
			fmt.Fprintf(stdout, "and from now on: card %s installed in agent %q's wallet (maiden cards ls -agent %s)\n",
				terminalSafe(strconv.Quote(g)), r.Agent, r.Agent)
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "denied %s: agent %q may not run %s", r.ID, r.Agent, call)
	if r.DecisionReason != "" {
		fmt.Fprintf(stdout, " (reason: %s)", terminalSafe(r.DecisionReason))
	}
	fmt.Fprintln(stdout)
	return exitOK
}

// decidedBy says who decided r, when that is known.
func decidedBy(r api.ApprovalRequest) string {
	if r.DecidedBy == "" {
		return ""
	}
	return " (by " + terminalSafe(r.DecidedBy) + ")"
}

// osUser names the user running this command, for the audit trail.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "uid" + strconv.Itoa(os.Getuid())
}
