package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/safetext"
)

// This file is `maiden audit`: the hash-chained audit trail of the state
// store (admin, over internal/store/audit.go), read from the command line. Opening the
// store ingests the audit journals of maiden processes that died (their
// acknowledged records); a running maiden serve's journal reaches the
// chain within its ingestion interval (20 ms by default).

const auditVerifyHelp = `Checks the whole audit chain of the state store: every record's hash, and that each links
to the one before it. Prints "ok: N records" and the head hash (note it: "maiden audit export"
output can later be checked against it), or names the first bad record and what was done to
it: edited, deleted, inserted or reordered.

The chain has no key: whoever can write the file can rewrite every record after some point and
recompute the hashes, which verifies on its own, or cut the last records off. -head HASH checks
that the trail still extends a head noted earlier: a record of it must have that hash (exit 1
if none has: the trail was cut or rewritten from before that record).

-export FILE checks a "maiden audit export" file (-format jsonl, a whole export) instead of the
state store, without agent.toml: its chain, and that its head line matches its last record (a
truncated export fails); with -head, that it extends that head.

-provenance also re-checks, offline, the chain from signature to record: every component digest
the call records name (oci:// tools) must have been signed by a key or keyless identity
agent.toml configures (verify), with the signature maiden pull kept in the component store
($MAIDEN_OCI_STORE); a line per digest says which key signed it, or why the check failed
(recorded unsigned, a signer agent.toml does not configure, no or a bad signature in the
store). A local file's digest (its SHA-256) is listed as local: nothing signed it, which fails
only under require_signatures = true. Each record's schema hash must be the one agent.toml
pins (tools.NAME.schema) when it pins that tool to the digest the record names; a record
naming another fails, by its number, tool and both hashes. Records made before records named
a local digest or a schema are counted ("none recorded"), not failed.

Exit codes: 0 intact (and, with -provenance, every component and pinned schema verified);
1 broken, a component or a record's schema failed, or the store is missing or failed;
2 bad command line or agent.toml.`

const auditTailHelp = `Prints the last records of the audit trail (20, or -n), oldest first: sequence number,
time, kind, actor, agent, tool and a summary of the body, what agents sent escaped for the
terminal. -json prints each record whole as a JSON line (seq, at, kind, actor, agent, tool,
body, prev, hash), with bidirectional, zero-width and C1 control characters as \u escapes (the
same JSON values; "maiden audit export" writes the bytes as hashed). -f keeps printing new records
as they are appended (by any process) until interrupted.

Exit codes: 0 done; 1 the store is missing or failed; 2 bad command line or agent.toml.`

const auditExportHelp = `Writes the audit trail to stdout, a page of records at a time (up to the last record there was
when it started), for a SIEM or an archive.

-format jsonl (the default): one record per line, exactly as stored and hashed, then a head line
{"head": HASH, "records": N, "from": F, "last": L, "prev": P}. A whole export (no -from) can be
checked elsewhere against the chain and a head noted earlier.

-format ocsf: one OCSF ` + admin.OCSFVersion + ` event per line: API Activity (class 6003) for calls, their
outcomes, http-fetches, approvals and sessions; User Access Management (class 3005) for card
and token changes. Each event keeps the record's kind, body, prev and hash under "unmapped"
(maiden_kind, maiden_body, maiden_prev, maiden_hash) and its number as metadata.sequence; the
head goes to stderr.

-from N starts at record N, to resume: pass the last exported record's number + 1, and check
that the first record's prev is the head you noted (every record carries its prev and hash).

Exit codes: 0 done; 1 the store is missing or failed; 2 bad command line or agent.toml.`

// auditTailPoll is how often audit tail -f looks for new records, and
// auditTailPage how many it reads at once.
const auditTailPoll = 200 * time.Millisecond

var auditTailPage = 1000 // a variable for tests

// openAudit opens the state store for an audit command: -state, or the
// store agent.toml names (which then must load). A store file that does not
// exist is an error, not an empty trail: a deleted store must not verify.
func (c *common) openAudit(ctx context.Context, name string, stderr io.Writer) (*admin.State, int) {
	path := c.state
	if path == "" {
		cfg, err := config.Load(c.config)
		if err != nil {
			printConfigErrors(stderr, err)
			return nil, exitUsage
		}
		path = c.statePath(cfg)
	}
	if config.IsStateURL(path) {
		// A database without maiden's schema holds no trail: opening it
		// would create an empty one.
		if st := admin.Inspect(ctx, path); !st.Reachable || st.SchemaState == "empty" {
			if st.Reachable {
				fmt.Fprintf(stderr, "maiden %s: no state store in %s: nothing was recorded there (-state names another)\n", name, st.Store)
			} else {
				fmt.Fprintf(stderr, "maiden %s: %s\n", name, strings.Join(st.Problems, "; "))
			}
			return nil, exitState
		}
	} else if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "maiden %s: no state store at %s: nothing was recorded there (-state names another file)\n", name, path)
		} else {
			fmt.Fprintf(stderr, "maiden %s: state store %s: %v\n", name, path, err)
		}
		return nil, exitState
	}
	st, err := admin.OpenStore(ctx, path, nil)
	if err != nil {
		fmt.Fprintf(stderr, "maiden %s: state store %s: %v\n", name, path, err)
		return nil, exitState
	}
	return st, exitOK
}

func cmdAuditVerify(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("audit verify", stderr)
	wantHead := fs.String("head", "", "also check that the trail extends the head `HASH`, noted earlier from verify or export: a record must have this hash")
	exportFile := fs.String("export", "", "check the audit export `FILE` (jsonl) instead of the state store (no agent.toml needed)")
	provenance := fs.Bool("provenance", false, "also check, offline, that each oci:// component digest the call records name was signed by a key or identity agent.toml configures (verify), with the signature maiden pull kept in the component store, and that each recorded schema hash is the one agent.toml pins")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "maiden audit verify: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	if h := *wantHead; h != "" && !isHashHex(h) {
		fmt.Fprintf(stderr, "maiden audit verify: -head %q is not a record hash (64 lowercase hex digits, as verify and export print it)\n", terminalSafe(h))
		return exitUsage
	}
	if *exportFile != "" {
		if *provenance || c.state != "" {
			fmt.Fprintln(stderr, "maiden audit verify: -export checks a file without the state store: -provenance and -state do not apply")
			return exitUsage
		}
		return verifyExportFile(*exportFile, *wantHead, stdout, stderr)
	}
	var cfg *config.Config
	if *provenance {
		// The keys to check against are agent.toml's, whatever -state says.
		if cfg, err = config.Load(c.config); err != nil {
			printConfigErrors(stderr, err)
			return exitUsage
		}
	}
	st, code := c.openAudit(ctx, "audit verify", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	n, head, err := st.VerifyAudit(ctx)
	if err != nil {
		// The error names the first bad record and why.
		fmt.Fprintf(stderr, "maiden audit verify: %s: %v\n", st.Path(), err)
		return exitState
	}
	if *wantHead != "" {
		found, err := auditHasHash(ctx, st, *wantHead)
		if err != nil {
			fmt.Fprintf(stderr, "maiden audit verify: %s: %v\n", st.Path(), err)
			return exitState
		}
		if !found {
			fmt.Fprintf(stderr, "maiden audit verify: %s: no record has the head %s: the trail (%d records, head %s) was cut or rewritten from before the record it named\n", st.Path(), *wantHead, n, head)
			return exitState
		}
	}
	fmt.Fprintf(stdout, "ok: %d records\nhead: %s\n", n, head)
	if !*provenance {
		return exitOK
	}
	p, err := st.VerifyProvenance(ctx, cfg, "")
	if err != nil {
		fmt.Fprintf(stderr, "maiden audit verify: -provenance: %v\n", err)
		return exitState
	}
	return printProvenance(stdout, stderr, p)
}

// isHashHex reports whether h is written as a record's hash is: 64
// lowercase hex digits.
func isHashHex(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := range len(h) {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// auditHasHash reports whether a record of st's trail has hash h, a page
// at a time (the chain was verified just before; this only looks for h).
func auditHasHash(ctx context.Context, st *admin.State, h string) (bool, error) {
	if h == strings.Repeat("0", 64) {
		return true, nil // the head of an empty trail, which every trail extends
	}
	for after := int64(0); ; {
		recs, err := st.AuditPage(ctx, after, auditTailPage, admin.AuditPageBytes)
		if err != nil {
			return false, err
		}
		if len(recs) == 0 {
			return false, nil
		}
		for _, r := range recs {
			if r.Hash == h {
				return true, nil
			}
			after = r.Seq
		}
	}
}

// verifyExportFile is audit verify -export: the file's chain and head line,
// and with wantHead, that it extends that head (admin.VerifyExport).
func verifyExportFile(path, wantHead string, stdout, stderr io.Writer) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(stderr, "maiden audit verify: -export: %v\n", err)
		return exitState
	}
	defer f.Close()
	n, head, err := admin.VerifyExport(f, wantHead)
	if err != nil {
		fmt.Fprintf(stderr, "maiden audit verify: %s: %v\n", path, err)
		return exitState
	}
	fmt.Fprintf(stdout, "ok: %d records\nhead: %s\n", n, head)
	return exitOK
}

// printProvenance prints what audit verify -provenance found, a line per
// recorded component and one per schema hash its records name, then a line
// per record naming a schema other than the pinned one, and says whether
// every one passed.
func printProvenance(stdout, stderr io.Writer, p admin.Provenance) int {
	local := 0
	for _, c := range p.Components {
		if c.Local {
			local++
		}
	}
	fmt.Fprintf(stdout, "provenance: %d component(s) (%d local file(s)) named by %d call record(s); %d admitted call(s) name none (wrapped CLIs, MCP imports, built-ins, local tools before records named their digest)\n",
		len(p.Components), local, p.Records, p.Unnamed)
	for _, c := range p.Components {
		tools := strings.Join(c.Tools, ", ")
		switch {
		case c.Problem != "":
			fmt.Fprintf(stdout, "  FAILED %s (%s, %d records): %s\n", c.Digest, tools, c.Records, c.Problem)
		case c.Local:
			fmt.Fprintf(stdout, "  local  %s (%s, %d records): a local file's SHA-256, unsigned\n", c.Digest, tools, c.Records)
		default:
			fmt.Fprintf(stdout, "  ok     %s (%s, %d records): signed by %s (%s)\n", c.Digest, tools, c.Records, c.Signer, c.KeyFile)
		}
		for _, sc := range c.Schemas {
			if sc.Hash == "" {
				fmt.Fprintf(stdout, "           schema none recorded (%d records)\n", sc.Records)
				continue
			}
			var parts []string
			if sc.Matched > 0 {
				parts = append(parts, fmt.Sprintf("%d the one agent.toml pins", sc.Matched))
			}
			if sc.Mismatched > 0 {
				parts = append(parts, fmt.Sprintf("%d FAILED: agent.toml pins another", sc.Mismatched))
			}
			if rest := sc.Records - sc.Matched - sc.Mismatched; rest > 0 {
				parts = append(parts, fmt.Sprintf("%d not pinned at this digest", rest))
			}
			fmt.Fprintf(stdout, "           schema %s (%d records): %s\n", sc.Hash, sc.Records, strings.Join(parts, ", "))
		}
	}
	for _, m := range p.SchemaMismatches {
		fmt.Fprintf(stdout, "  FAILED record %d (%s, %s): schema %s recorded, agent.toml pins %s (tools.%s.schema)\n", m.Seq, m.Tool, m.Component, m.Recorded, m.Pinned, m.Tool)
	}
	if more := p.SchemaFailed - int64(len(p.SchemaMismatches)); more > 0 {
		fmt.Fprintf(stdout, "  ... and %d more record(s) naming a schema other than the pinned one\n", more)
	}
	if p.Failed > 0 || p.SchemaFailed > 0 {
		var what []string
		if p.Failed > 0 {
			what = append(what, fmt.Sprintf("%d of %d component(s) failed", p.Failed, len(p.Components)))
		}
		if p.SchemaFailed > 0 {
			what = append(what, fmt.Sprintf("%d record(s) name a schema other than the one agent.toml pins", p.SchemaFailed))
		}
		fmt.Fprintf(stderr, "maiden audit verify: -provenance: %s\n", strings.Join(what, "; "))
		return exitState
	}
	return exitOK
}

func cmdAuditTail(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("audit tail", stderr)
	follow := fs.Bool("f", false, "keep printing records as they are appended, until interrupted")
	asJSON := fs.Bool("json", false, "print each record whole, as a JSON line")
	n := fs.Int("n", 20, "how many of the last records to print first")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "maiden audit tail: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	if *n < 0 {
		fmt.Fprintf(stderr, "maiden audit tail: -n %d: must be 0 or more\n", *n)
		return exitUsage
	}
	st, code := c.openAudit(ctx, "audit tail", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	last, err := st.LastAuditSeq(ctx)
	if err != nil {
		return auditFailed(stderr, "audit tail", err)
	}
	after := max(last-int64(*n), 0)
	emit := func(recs []api.AuditRecord) {
		for _, r := range recs {
			if *asJSON {
				b, _ := jsonLine(r)
				stdout.Write(b)
			} else {
				fmt.Fprintln(stdout, auditLine(r))
			}
			after = r.Seq
		}
	}
	if *n > 0 {
		recs, err := st.AuditTail(ctx, after, *n)
		if err != nil {
			return auditFailed(stderr, "audit tail", err)
		}
		emit(recs)
	}
	after = max(after, last)
	if !*follow {
		return exitOK
	}
	tick := time.NewTicker(auditTailPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-tick.C:
		}
		for { // a burst may be more than one page
			recs, err := st.AuditPage(ctx, after, auditTailPage, admin.AuditPageBytes)
			if ctx.Err() != nil {
				return exitOK
			}
			if err != nil {
				return auditFailed(stderr, "audit tail", err)
			}
			emit(recs)
			if len(recs) == 0 {
				break
			}
		}
	}
}

func cmdAuditExport(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("audit export", stderr)
	format := fs.String("format", admin.ExportJSONL, "output `FORMAT`: jsonl (records as stored, then the head line) or ocsf (OCSF "+admin.OCSFVersion+" events)")
	from := fs.Int64("from", 0, "start at record `N` (to resume, one past the last record exported)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "maiden audit export: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	if *format != admin.ExportJSONL && *format != admin.ExportOCSF {
		fmt.Fprintf(stderr, "maiden audit export: -format %q: must be jsonl or ocsf\n", *format)
		return exitUsage
	}
	if *from < 0 {
		fmt.Fprintf(stderr, "maiden audit export: -from %d: must be 0 or more\n", *from)
		return exitUsage
	}
	st, code := c.openAudit(ctx, "audit export", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	h, err := st.ExportAuditStream(ctx, stdout, admin.ExportOptions{Format: *format, From: *from})
	if err != nil {
		return auditFailed(stderr, "audit export", err)
	}
	fmt.Fprintf(stderr, "exported %d records (%d..%d), head %s\n", h.Records, h.From, h.Last, h.Head)
	return exitOK
}

func auditFailed(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "maiden %s: %v\n", name, err)
	return exitState
}

// jsonLine is r as one JSON line for a terminal: its fields and body hold
// what agents, tools and upstream servers sent, and encoding/json leaves
// the bidirectional, zero-width and C1 controls among it raw, so they are
// written as \u escapes (safetext.JSON, as printJSON does): the same JSON
// values. The bytes as hashed are audit export's.
func jsonLine(r api.AuditRecord) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(r)
	return []byte(safetext.JSON(b.String())), err
}

// auditLine is r for a human: seq, local time, kind, actor, agent, tool and
// the body cut to a line, with whatever a caller supplied escaped for the
// terminal.
func auditLine(r api.AuditRecord) string {
	body := string(r.Body)
	const maxBody = 160
	if len(body) > maxBody {
		cut := maxBody
		for cut > 0 && !utf8.RuneStart(body[cut]) {
			cut--
		}
		body = body[:cut] + "…"
	}
	return fmt.Sprintf("%6d  %s  %-18s %-16s %-12s %-12s %s", r.Seq, r.At.Local().Format("2006-01-02 15:04:05.000"),
		terminalSafe(r.Kind), orDash(terminalSafe(r.Actor)), orDash(terminalSafe(r.Agent)), orDash(terminalSafe(r.Tool)), terminalSafe(body))
}
