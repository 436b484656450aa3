package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
)

// This file is `maiden sessions ls|show|end`: the sessions the state store
// holds, with their sandbox boundaries, revisions and boundary requests,
// and an operator's end of one.
// Paths and justifications come from agents: printed through terminalSafe.

const sessionsLsHelp = `Lists the sessions in the state store, newest first: ID, agent, the boundary's current
revision, whether network is enabled, its filesystem entries, and when it ended (live
sessions show "-").

With -json: an array of sessions, each {"id", "agent", "created", "ended"?, "boundary"} where
boundary is the session's ExecutionBoundary as docs/boundaries.md describes it.

Exit codes: 0 done; 2 bad command line or agent.toml; 1 the state store failed.`

const sessionsShowHelp = `Shows one session: its agent, times, current boundary (kind, revision, network, filesystem
entries, explicit deny paths, protected names), every revision with when and why it was
made, and every boundary request with its status, reason and justification.

With -json: the session with "revisions" and "requests".

Exit codes: 0 done; 2 bad command line, agent.toml, or no such session; 1 the state store
failed.`

const sessionsEndHelp = `Ends a session as an operator: its boundary (with whatever a human widened in it) stops
applying, every later call naming it is refused, by every maiden sharing the state store, and
its pending boundary requests are denied (session_ended). An ended session is never
reopened; the agent can open another (session_open). A call of the session already running
runs to its end. Ending a default session (default-AGENT/token:ID, default-AGENT/stdio)
leaves that client no session until it opens one with session_open: revoke its token
instead to cut it off. Audited: the session-ended record names the operator (cli:USER).

Exit codes: 0 ended, or ended already (said so); 2 bad command line, agent.toml, or no such
session; 1 the state store failed.`

func cmdSessionsEnd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("sessions end", stderr)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "maiden sessions end: want one session ID (maiden sessions ls lists them)")
		return exitUsage
	}
	s, code := c.openStateFor(ctx, stderr, true)
	if s == nil {
		return code
	}
	defer s.close()
	ended, err := s.st.EndSession(ctx, pos[0], "cli:"+osUser())
	switch {
	case errors.Is(err, admin.ErrUnknownSession):
		fmt.Fprintf(stderr, "maiden sessions end: no session %s (maiden sessions ls lists them)\n", terminalSafe(pos[0]))
		return exitUsage
	case err != nil:
		return failed(stderr, "sessions end", err)
	case !ended:
		fmt.Fprintf(stdout, "session %s had ended already: nothing changed\n", terminalSafe(pos[0]))
	default:
		fmt.Fprintf(stdout, "session %s ended: later calls naming it are refused\n", terminalSafe(pos[0]))
	}
	return exitOK
}

func cmdSessionsLs(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("sessions ls", stderr)
	agent := fs.String("agent", "", "only the sessions of agent `NAME`")
	asJSON := fs.Bool("json", false, "print a JSON array of sessions")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "maiden sessions ls: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	s, code := c.openStateFor(ctx, stderr, true)
	if s == nil {
		return code
	}
	defer s.close()
	list, err := s.st.Sessions(ctx, *agent)
	if err != nil {
		return failed(stderr, "sessions ls", err)
	}
	if *asJSON {
		if list == nil {
			list = []api.SessionInfo{}
		}
		printJSON(stdout, list)
		return exitOK
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no sessions")
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAGENT\tREVISION\tNETWORK\tFILESYSTEM\tENDED")
	for _, si := range list {
		ended := "-"
		if !si.Ended.IsZero() {
			ended = si.Ended.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", terminalSafe(si.ID), terminalSafe(si.Agent), si.Boundary.Revision,
			onOff(si.Boundary.Network), terminalSafe(entriesText(si.Boundary)), ended)
	}
	tw.Flush()
	return exitOK
}

func cmdSessionsShow(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("sessions show", stderr)
	asJSON := fs.Bool("json", false, "print the session as JSON, with its revisions and requests")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "maiden sessions show: want one session ID (maiden sessions ls lists them)")
		return exitUsage
	}
	s, code := c.openStateFor(ctx, stderr, true)
	if s == nil {
		return code
	}
	defer s.close()
	si, err := s.st.Session(ctx, pos[0])
	if errors.Is(err, admin.ErrUnknownSession) {
		fmt.Fprintf(stderr, "maiden sessions show: no session %s in %s\n", terminalSafe(strconv.Quote(pos[0])), s.path)
		return exitUsage
	}
	if err != nil {
		return failed(stderr, "sessions show", err)
	}
	if *asJSON {
		printJSON(stdout, si)
		return exitOK
	}
	b := si.Boundary
	ended := "live"
	if !si.Ended.IsZero() {
		ended = "ended " + si.Ended.Local().Format(time.DateTime)
	}
	for _, l := range [][2]string{
		{"session", terminalSafe(si.ID)},
		{"agent", terminalSafe(si.Agent)},
		{"state", ended},
		{"created", si.Created.Local().Format(time.DateTime)},
		{"boundary", fmt.Sprintf("%s, revision %d, filesystem %s", b.Kind, b.Revision, b.Filesystem)},
		{"network", onOff(b.Network)},
		{"entries", terminalSafe(entriesText(b))},
		{"deny", orDash(terminalSafe(strings.Join(b.Deny, ", ")))},
		{"protected", orDash(terminalSafe(strings.Join(b.Protected, ", ")))},
	} {
		fmt.Fprintf(stdout, "%-10s %s\n", l[0], l[1])
	}
	if len(si.Revisions) > 0 {
		fmt.Fprintln(stdout, "\nrevisions:")
		for _, r := range si.Revisions {
			fmt.Fprintf(stdout, "  %d  %s  %s\n", r.Revision, r.At.Local().Format(time.DateTime), terminalSafe(r.Why))
		}
	}
	if len(si.Requests) > 0 {
		fmt.Fprintln(stdout, "\nboundary requests:")
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  HANDLE\tID\tSTATUS\tREASON\tEXPANSION\tJUSTIFICATION")
		for _, r := range si.Requests {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", terminalSafe(r.Handle), terminalSafe(r.Request.ID), r.Request.Status,
				orDash(terminalSafe(r.Request.Reason)), terminalSafe(string(r.Request.Expansion)), terminalSafe(r.Request.Justification))
		}
		tw.Flush()
	}
	return exitOK
}

func onOff(b bool) string {
	if b {
		return "enabled"
	}
	return "disabled"
}

// entriesText is a boundary's filesystem entries in one line.
func entriesText(b api.Boundary) string {
	if len(b.Entries) == 0 {
		return "-"
	}
	parts := make([]string, len(b.Entries))
	for i, e := range b.Entries {
		parts[i] = fmt.Sprintf("%s %s %s", e.Access, e.Match, e.Path)
	}
	return strings.Join(parts, "; ")
}
