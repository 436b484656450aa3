package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/maiden-run/maiden"
)

// This file is `maiden mcp accept`: an operator reviews the tools an
// imported MCP server ([mcp.NAME]) offers now against what was accepted,
// and accepts them (pins.go in the root). Everything the upstream wrote is
// shown escaped (terminalSafe): it is someone else's text.

const mcpAcceptHelp = `Starts the MCP server of [mcp.NAME] (as maiden serve would), lists its tools and shows each one
that no operator has accepted yet (title, description, input schema) or whose definition the
upstream changed since it was accepted (old against new, line by line: - old, + new), then pins
them in maiden-pins.json next to agent.toml. Until then maiden refuses a new or changed tool
(kind denied; a changed one keeps being listed to agents as it was accepted). TOOL... accepts
only those tools (NAME.TOOL or TOOL); -dry-run shows and writes nothing. Control characters,
escape sequences and bidirectional or zero-width characters of the upstream's text are shown as
escapes (\x1b, \u202e). With -json: the reviews ({tool, state, changes, accepted, offered}), those
characters as JSON \u escapes.
Exit codes: 0 done (or nothing to accept); 2 bad command line or agent.toml, no such import, its
server not up; 1 the pin file could not be written.`

func cmdMCPAccept(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("mcp accept", stderr)
	dry := fs.Bool("dry-run", false, "show what would be accepted; write nothing")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(rest) == 0 {
		fmt.Fprintln(stderr, "maiden mcp accept: which import? maiden mcp accept NAME [TOOL...]")
		return exitUsage
	}
	name, only := rest[0], rest[1:]
	h, err := c.host(stderr)
	if err != nil {
		printConfigErrors(stderr, err)
		return exitUsage
	}
	defer h.Close(context.Background())
	reviews, err := h.ReviewImport(ctx, name)
	if err != nil {
		fmt.Fprintln(stderr, "maiden mcp accept:", terminalSafe(err.Error()))
		return exitUsage
	}
	var todo []maiden.ImportReview
	for _, r := range reviews {
		short := strings.TrimPrefix(r.Tool, name+".")
		if len(only) > 0 && !slices.Contains(only, r.Tool) && !slices.Contains(only, short) {
			continue
		}
		if r.State != "accepted" {
			todo = append(todo, r)
		}
	}
	for _, o := range only {
		if !slices.ContainsFunc(reviews, func(r maiden.ImportReview) bool { return r.Tool == o || r.Tool == name+"."+o }) {
			fmt.Fprintf(stderr, "maiden mcp accept: the MCP server %q offers no tool %s\n", name, terminalSafe(o))
			return exitUsage
		}
	}
	if *asJSON {
		if todo == nil {
			todo = []maiden.ImportReview{}
		}
		// The upstream's text, bidirectional controls and all: escaped
		// (safetext.JSON) like every -json an operator may read.
		printJSON(stdout, todo)
	} else {
		for _, r := range todo {
			showReview(stdout, r)
		}
	}
	switch {
	case len(todo) == 0:
		if !*asJSON {
			fmt.Fprintf(stdout, "%s: every tool is accepted as it is; nothing to do\n", name)
		}
		return exitOK
	case *dry:
		if !*asJSON {
			fmt.Fprintf(stdout, "-dry-run: %d tools not accepted; nothing written\n", len(todo))
		}
		return exitOK
	}
	if err := h.AcceptImport(todo); err != nil {
		fmt.Fprintln(stderr, "maiden mcp accept:", err)
		return exitTool
	}
	if !*asJSON {
		where := h.MCPPinsPath()
		fmt.Fprintf(stdout, "accepted %d tools of %s into %s\n", len(todo), name, where)
	}
	return exitOK
}

// showReview prints one tool to accept: a new one whole, a changed one as
// old against new.
func showReview(w io.Writer, r maiden.ImportReview) {
	o := r.Offered
	if r.State == "new" || r.Accepted == nil {
		fmt.Fprintf(w, "%s: new tool (never accepted)\n", r.Tool)
		if o.Title != "" {
			fmt.Fprintf(w, "  title:        %s\n", terminalSafe(o.Title))
		}
		fmt.Fprintf(w, "  description:\n")
		for _, l := range strings.Split(o.Description, "\n") {
			fmt.Fprintf(w, "    %s\n", terminalSafe(l))
		}
		fmt.Fprintf(w, "  input schema:\n")
		for _, l := range schemaLines(o.InputSchema) {
			fmt.Fprintf(w, "    %s\n", terminalSafe(l))
		}
		fmt.Fprintln(w)
		return
	}
	a := r.Accepted
	fmt.Fprintf(w, "%s: CHANGED since it was accepted: %s\n", r.Tool, strings.Join(r.Changes, ", "))
	if a.Title != o.Title {
		fmt.Fprintf(w, "  title:\n    - %s\n    + %s\n", terminalSafe(a.Title), terminalSafe(o.Title))
	}
	if a.Description != o.Description {
		fmt.Fprintf(w, "  description:\n")
		writeDiff(w, strings.Split(a.Description, "\n"), strings.Split(o.Description, "\n"))
	}
	if a.InputSchema != o.InputSchema {
		fmt.Fprintf(w, "  input schema:\n")
		writeDiff(w, schemaLines(a.InputSchema), schemaLines(o.InputSchema))
	}
	fmt.Fprintln(w)
}

func schemaLines(s string) []string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		return []string{s}
	}
	return strings.Split(b.String(), "\n")
}

// writeDiff prints a line diff of old and new ("  " same, "- " old only,
// "+ " new only), from their longest common subsequence.
func writeDiff(w io.Writer, old, new []string) {
	n, m := len(old), len(new)
	if n*m > 4_000_000 { // too long to align: show both whole
		for _, l := range old {
			fmt.Fprintf(w, "    - %s\n", terminalSafe(l))
		}
		for _, l := range new {
			fmt.Fprintf(w, "    + %s\n", terminalSafe(l))
		}
		return
	}
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if old[i] == new[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && old[i] == new[j]:
			fmt.Fprintf(w, "      %s\n", terminalSafe(old[i]))
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			fmt.Fprintf(w, "    - %s\n", terminalSafe(old[i]))
			i++
		default:
			fmt.Fprintf(w, "    + %s\n", terminalSafe(new[j]))
			j++
		}
	}
}
