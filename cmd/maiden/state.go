package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/config"
)

// This file is `maiden state check` and `maiden state migrate`: the
// operator's view of the state store itself (where it is, whether this
// maiden can use it, its schema version), for a SQLite file or a
// PostgreSQL database shared by several instances.

const stateCheckHelp = `Checks that this maiden can use the state store (-state, else agent.toml's [state] url or
path), without changing it: the database answers (a PostgreSQL server: its address, version,
user and schema; a SQLite file: that it exists), its schema version against this binary's, and
the privileges maiden needs (PostgreSQL: USAGE on the schema, CREATE on it when a migration is
due, and on each of maiden's tables what the store uses there: SELECT and INSERT on the audit
trail, which may refuse UPDATE and DELETE; SQLite: write access to the file and its directory). Every problem is printed, one per line.
With -json: {"store", "backend", "reachable", "server", "user", "schema", "schema_version",
"binary_schema_version", "schema_state" (empty, behind, current, newer, or unknown when the
version may not be read), "missing_privileges",
"problems", "ok"}.

Exit codes: 0 usable (a schema behind this binary is usable: the first maiden to open the
store migrates it, or run "maiden state migrate"); 1 unreachable, a schema newer than this
binary, or a missing privilege; 2 bad command line or agent.toml.`

const stateMigrateHelp = `Brings the state store's schema up to this binary's version and prints "schema version
OLD → NEW" (or that it was already current). Several instances may migrate at once: each step
runs once, the others wait for it. Every maiden command migrates the store it opens too; this
command does it on its own, before a rollout. With -json: {"store", "from", "to"}.

Exit codes: 0 done (or nothing to do); 1 unreachable, a schema newer than this binary, a
missing privilege, or a failed migration; 2 bad command line or agent.toml.`

// stateLocation is the store a state command works on: -state, else the
// one agent.toml names (which then must load).
func (c *common) stateLocation(stderr io.Writer) (string, int) {
	if c.state != "" {
		return c.state, exitOK
	}
	cfg, err := config.Load(c.config)
	if err != nil {
		printConfigErrors(stderr, err)
		return "", exitUsage
	}
	return cfg.StatePath(), exitOK
}

func stateFlags(name string, stderr io.Writer, args []string) (*flag.FlagSet, *common, *bool, int) {
	fs, c := newFlags(name, stderr)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, nil, nil, parseFailed(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "maiden %s: unexpected argument %q\n", name, pos[0])
		return nil, nil, nil, exitUsage
	}
	return fs, c, asJSON, -1
}

func cmdStateCheck(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	_, c, asJSON, code := stateFlags("state check", stderr, args)
	if code >= 0 {
		return code
	}
	loc, code := c.stateLocation(stderr)
	if code != exitOK {
		return code
	}
	st := admin.Inspect(ctx, loc)
	if *asJSON {
		printJSON(stdout, st)
	} else {
		printStateStatus(stdout, st)
		for _, p := range st.Problems {
			fmt.Fprintf(stderr, "maiden state check: %s\n", p)
		}
	}
	if !st.OK {
		return exitState
	}
	return exitOK
}

func printStateStatus(w io.Writer, st *admin.StoreStatus) {
	switch {
	case !st.Reachable:
		fmt.Fprintf(w, "state store %s (%s): not reachable\n", st.Store, st.Backend)
		return
	case st.Backend == "postgres":
		fmt.Fprintf(w, "state store %s (PostgreSQL %s, user %s, schema %s)\n", st.Store, st.Server, st.User, st.Schema)
	default:
		fmt.Fprintf(w, "state store %s (SQLite)\n", st.Store)
	}
	switch st.SchemaState {
	case "empty":
		fmt.Fprintf(w, "schema: none yet; this maiden's is version %d (the first maiden to open the store creates it)\n", st.BinarySchemaVersion)
	case "behind":
		fmt.Fprintf(w, "schema: version %d, this maiden's %d: behind (maiden state migrate, or the first maiden to open the store, migrates it)\n", st.SchemaVersion, st.BinarySchemaVersion)
	case "current":
		fmt.Fprintf(w, "schema: version %d, this maiden's %d: current\n", st.SchemaVersion, st.BinarySchemaVersion)
	case "newer":
		fmt.Fprintf(w, "schema: version %d, this maiden's %d: newer than this maiden\n", st.SchemaVersion, st.BinarySchemaVersion)
	case "unknown":
		fmt.Fprintf(w, "schema: version unknown (it may not be read), this maiden's %d\n", st.BinarySchemaVersion)
	}
	if len(st.MissingPrivileges) == 0 {
		fmt.Fprintln(w, "privileges: ok")
	} else {
		fmt.Fprintf(w, "privileges: missing %s\n", strings.Join(st.MissingPrivileges, "; "))
	}
	if st.OK {
		fmt.Fprintln(w, "ok")
	}
}

func cmdStateMigrate(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	_, c, asJSON, code := stateFlags("state migrate", stderr, args)
	if code >= 0 {
		return code
	}
	loc, code := c.stateLocation(stderr)
	if code != exitOK {
		return code
	}
	before := admin.Inspect(ctx, loc)
	if !before.Reachable || before.SchemaState == "newer" {
		for _, p := range before.Problems {
			fmt.Fprintf(stderr, "maiden state migrate: %s\n", p)
		}
		return exitState
	}
	// Migrate opens the store, which migrates it, each step under the
	// store's own exclusion (an advisory lock on PostgreSQL, the write
	// lock on SQLite), so that instances migrating at once run each step
	// once.
	if err := admin.Migrate(ctx, loc); err != nil {
		fmt.Fprintf(stderr, "maiden state migrate: %s: %v\n", admin.RedactLocation(loc), err)
		if hint := admin.PrivilegeHint(err); hint != "" {
			fmt.Fprintf(stderr, "maiden state migrate: %s\n", hint)
		}
		return exitState
	}
	after := admin.Inspect(ctx, loc)
	if !after.Reachable {
		for _, p := range after.Problems {
			fmt.Fprintf(stderr, "maiden state migrate: %s\n", p)
		}
		return exitState
	}
	if *asJSON {
		printJSON(stdout, map[string]any{"store": after.Store, "from": before.SchemaVersion, "to": after.SchemaVersion})
		return exitOK
	}
	if before.SchemaVersion == after.SchemaVersion {
		fmt.Fprintf(stdout, "%s: schema version %d: already current\n", after.Store, after.SchemaVersion)
	} else {
		fmt.Fprintf(stdout, "%s: schema version %d → %d\n", after.Store, before.SchemaVersion, after.SchemaVersion)
	}
	return exitOK
}
