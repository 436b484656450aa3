package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
only those tools (NAME.TOOL or TOOL); -dry-run shows and writes nothing, and ends with the
-expect DIGEST that accepts exactly what it showed: with -expect, accept refuses (and pins
nothing) if the tools to accept are not the ones that digest was shown for, e.g. the upstream
changed a definition after the review. Control characters,
escape sequences and bidirectional or zero-width characters of the upstream's text are shown as
escapes (\x1b, \u202e). With -json: the reviews ({tool, state, changes, accepted, offered}), those
characters as JSON \u escapes.
Exit codes: 0 done (or nothing to accept); 2 bad command line or agent.toml, no such import, its
server not up; 1 nothing accepted: -expect does not match what is offered now, or the pin file
could not be written.`

func cmdMCPAccept(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("mcp accept", stderr)
	dry := fs.Bool("dry-run", false, "show what would be accepted; write nothing")
	asJSON := fs.Bool("json", false, "print JSON")
	expect := fs.String("expect", "", "accept only if the tools to accept are exactly those a -dry-run showed with this `DIGEST`")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if *expect != "" && !isReviewDigest(*expect) {
		fmt.Fprintf(stderr, "maiden mcp accept: -expect %s is not a digest a -dry-run printed (64 hexadecimal digits)\n", terminalSafe(*expect))
		return exitUsage
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
	digest := reviewDigest(name, todo)
	switch {
	case *expect != "" && *expect != digest:
		fmt.Fprintf(stderr, "maiden mcp accept: nothing accepted: the tools %s offers to accept now (above) are not the ones -expect %s was shown for (their digest is %s); review them again\n",
			terminalSafe(name), *expect, digest)
		return exitTool
	case len(todo) == 0:
		if !*asJSON {
			fmt.Fprintf(stdout, "%s: every tool is accepted as it is; nothing to do\n", name)
		}
		return exitOK
	case *dry:
		hint := "to accept exactly what is shown, run the same command with -expect " + digest + " instead of -dry-run"
		if *asJSON {
			fmt.Fprintln(stderr, hint) // stdout is the reviews' JSON
		} else {
			fmt.Fprintf(stdout, "-dry-run: %d tools not accepted; nothing written\n%s\n", len(todo), hint)
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

// reviewDigest names the tools to accept of import name and the
// definitions offered for them (the name shown, the upstream's own name,
// which the shown one may sanitise, the state and each review's pin
// digest, which covers the title, description and input schema): what a
// -dry-run showed, for -expect to hold the accept to.
func reviewDigest(name string, todo []maiden.ImportReview) string {
	lines := make([]string, 0, len(todo))
	for _, r := range todo {
		lines = append(lines, fmt.Sprintf("%q %q %q %q\n", r.Tool, r.UpstreamName, r.State, r.Offered.Digest))
	}
	slices.Sort(lines)
	h := sha256.New()
	fmt.Fprintf(h, "maiden mcp accept 1 %q\n", name)
	for _, l := range lines {
		io.WriteString(h, l)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// isReviewDigest reports whether s has reviewDigest's form.
func isReviewDigest(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
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
