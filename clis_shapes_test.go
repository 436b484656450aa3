//go:build linux

package maiden_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
)

// TestWrappedCLIPositionalShapes: a positional that does not start with
// '-' but that the program reads as something other than data is refused
// before anything runs, though the agent's card allows any positional
// (docs/command-model.md, "Positionals the program reads as more than
// data"). The real env reads NAME=VALUE after "--" (the marker does not
// help); the real tar reads a first word as bundled options (tar cf
// out.tar in.txt writes an archive the card never named).
func TestWrappedCLIPositionalShapes(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "in.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.env]
path = "/usr/bin/env"
command = '{"maiden_command": 1, "name": "env", "end_of_options": "--", "positionals": [{"name": "args", "variadic": true}]}'
[clis.tar]
path = "/usr/bin/tar"
command = '{"maiden_command": 1, "name": "tar", "options": [{"name": "list", "short": "t", "kind": "bool"}, {"name": "file", "short": "f"}], "positionals": [{"name": "members", "variadic": true}]}'
dir = "`+work+`"
read_paths = ["`+work+`"]
write_paths = ["`+work+`"]
[agents.dev]
tools = ["env", "tar"]
grants = ["tool:invoke env -- *", "tool:invoke tar --... -- ..."]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	call := func(tool, in string) maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: "dev", Tool: tool, Input: in})
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		return res
	}
	for _, tc := range []struct{ in, want string }{
		{`{"args":["MAIDEN_OWNED=1"]}`, `positional "args": has an '=' before any '/', which make and env read as a variable assignment (NAME=VALUE)`},
		{`{"args":["+!sh"]}`, `positional "args": starts with '+', which less, more and vim read as a command to run (+CMD)`},
		{`{"args":["@/etc/passwd"]}`, `positional "args": starts with '@', which many programs read as a file of further arguments`},
	} {
		wantKind(t, call("env", tc.in), maiden.KindInput, tc.want)
	}
	// A '/' before the '=' passes: env still sets a variable, but one
	// named "./MAIDEN", which no program looks up (a name with a '/'
	// cannot be PATH, LD_PRELOAD or SHELL), and prints it.
	if res := call("env", `{"args":["./MAIDEN=1"]}`); !res.OK || res.Output != "./MAIDEN=1\n" {
		t.Fatalf("env -- ./MAIDEN=1: %+v %+v", res, res.Error)
	}
	wantKind(t, call("tar", `{"members":["cf","out.tar","in.txt"]}`), maiden.KindInput,
		`positional "members": would be the program's first argument and "tar" has no end-of-options marker, so tar and ar would read it as bundled options`)
	if _, err := os.Stat(filepath.Join(work, "out.tar")); err == nil {
		t.Fatal("tar read the agent's first word as options and wrote out.tar")
	}
	// After an option, the same word is a member name (tar --list
	// --file=in.txt cf fails to read in.txt as an archive; nothing is written).
	if res := call("tar", `{"list":true,"file":"in.txt","members":["cf"]}`); res.OK || res.Error.Kind != maiden.KindTool {
		t.Fatalf("tar --list --file=in.txt cf: %+v %+v", res, res.Error)
	}
	if _, err := os.Stat(filepath.Join(work, "out.tar")); err == nil {
		t.Fatal("tar wrote out.tar")
	}
}

// TestWrappedCLIDotDotPositional: a card's positional glob does not match
// a ".." segment (CARDS.md A11, the glob extension; docs/cards.md): with
// `tool:invoke cat -- docs/*` the real cat reads docs/report.txt and is
// never run on docs/../secret.txt, though its read_paths (the whole
// directory) would let it.
func TestWrappedCLIDotDotPositional(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"docs/report.txt": "the report", "secret.txt": "the secret"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.cat]
path = "/bin/cat"
command = '{"maiden_command": 1, "name": "cat", "end_of_options": "--", "positionals": [{"name": "files", "variadic": true}]}'
dir = "`+root+`"
read_paths = ["`+root+`"]
[agents.dev]
tools = ["cat"]
grants = ["tool:invoke cat -- docs/*"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	call := func(in string) maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: "dev", Tool: "cat", Input: in})
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		return res
	}
	if res := call(`{"files":["docs/report.txt"]}`); !res.OK || res.Output != "the report" {
		t.Fatalf("docs/report.txt: %+v %+v", res, res.Error)
	}
	for _, p := range []string{"docs/../secret.txt", "docs/x/../../secret.txt", "docs/.."} {
		res := call(`{"files":["` + p + `"]}`)
		wantKind(t, res, maiden.KindDenied, "tool:invoke cat -- "+p)
		if strings.Contains(res.Output, "the secret") {
			t.Fatalf("%s: the secret was read", p)
		}
	}
}

// TestWrappedCLIOptionValueAt: an option's value that starts with '@' is
// refused before anything runs, though the agent's card allows any value
// (docs/command-model.md, "Option values the program reads as a file"):
// the real curl (which reads --write-out VALUE, separate) reads -w @FILE
// as the name of a file to print, so a card
// allowing `--write-out=*` would print any file the CLI may read. An
// option whose description lists "at" in its accept passes the value on
// (curl then prints the file: the program really reads it so).
func TestWrappedCLIOptionValueAt(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	secret := filepath.Join(work, "secret.txt")
	if err := os.WriteFile(secret, []byte("the secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	const desc = `{"maiden_command": 1, "name": "curl", "options": [{"name": "silent", "short": "s", "kind": "bool"}, {"name": "write-out", "short": "w"%s}], "positionals": [{"name": "url"}]}`
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[clis.curl]
path = "/usr/bin/curl"
command = '`+fmt.Sprintf(desc, "")+`'
option_style = "separate"
dir = "`+work+`"
read_paths = ["`+work+`"]
[clis.curlat]
path = "/usr/bin/curl"
command = '`+fmt.Sprintf(desc, `, "accept": ["at"]`)+`'
option_style = "separate"
dir = "`+work+`"
read_paths = ["`+work+`"]
[agents.dev]
tools = ["curl", "curlat"]
grants = ["tool:invoke curl --... -- ...", "tool:invoke curlat --... -- ..."]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	ctx := context.Background()
	in := `{"silent":true,"write-out":"@` + secret + `","url":"file:///dev/null"}`
	res, err := h.Call(ctx, maiden.Call{Agent: "dev", Tool: "curl", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Output, "the secret") {
		t.Fatalf("curl -w @%s printed the file: %q", secret, res.Output)
	}
	wantKind(t, res, maiden.KindInput, `property "write-out": starts with '@', which many programs read as a file to take the value from (curl -d @FILE`)
	res, err = h.Call(ctx, maiden.Call{Agent: "dev", Tool: "curlat", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Output != "the secret" {
		t.Fatalf("curl -w @FILE with \"accept\": [\"at\"]: %+v %+v", res, res.Error)
	}
}
