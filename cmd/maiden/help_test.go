package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryCommandsHelp: -h on every command (subcommands too) exits 0 and
// prints the command's synopsis and its flags; each flag's value
// placeholder is a word that means something (FILE, ADDR, N, a duration),
// never Go's fallbacks "value" or "string", and a boolean flag has none:
// Go's flag package makes the first `backquoted` word of a usage string the
// placeholder, which once turned serve's -auth-token-env into a header.
// `maiden help CMD` prints the same on stdout.
func TestEveryCommandsHelp(t *testing.T) {
	t.Parallel()
	flagLine := regexp.MustCompile(`^  (-[a-z][a-z0-9-]*)(?: ([^\s]+))?(?:\t|$)`)
	placeholder := regexp.MustCompile(`^([A-Z][A-Z.]*|int|uint|float|duration)$`)
	n := 0
	for _, c := range commands {
		if c.hidden || c.run == nil {
			continue
		}
		n++
		t.Run(c.name, func(t *testing.T) {
			r := cli(t, "", append(strings.Fields(c.name), "-h")...)
			if r.code != exitOK || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
			}
			head := "Usage of maiden " + c.name + ":\n  " + strings.TrimSpace("maiden "+c.name+" "+c.args) + "\n\n" + c.summary + "\n"
			if !strings.HasPrefix(r.stderr, head) {
				t.Errorf("-h starts:\n%s\nwant:\n%s", r.stderr, head)
			}
			fs := commandFlags(c)
			_, flags, _ := strings.Cut(r.stderr, "\nFlags:\n")
			for _, l := range strings.Split(flags, "\n") {
				if !strings.HasPrefix(l, "  -") {
					continue
				}
				m := flagLine.FindStringSubmatch(l)
				if m == nil {
					t.Errorf("odd flag line %q", l)
					continue
				}
				f := fs.Lookup(m[1][1:])
				if f == nil {
					t.Errorf("-h lists %s, which the command does not define", m[1])
					continue
				}
				switch name, ph, isBool := m[1], m[2], isBoolFlag(f); {
				case isBool && ph != "":
					t.Errorf("boolean %s shows a placeholder %q (a backquoted word in its usage?)", name, ph)
				case !isBool && !placeholder.MatchString(ph):
					t.Errorf("%s's placeholder is %q: put the value's name in backquotes in its usage, e.g. `FILE`", name, ph)
				}
			}
			h := cli(t, "", append([]string{"help"}, strings.Fields(c.name)...)...)
			if h.code != exitOK || h.stdout != r.stderr {
				t.Errorf("maiden help %s: exit %d, stdout differs from -h:\n%s", c.name, h.code, h.stdout)
			}
		})
	}
	if n < 10 {
		t.Errorf("only %d commands checked", n)
	}
}

// TestUsageListsEveryCommand: the usage is made from the command table.
func TestUsageListsEveryCommand(t *testing.T) {
	t.Parallel()
	r := cli(t, "", "help")
	for _, c := range commands {
		if c.hidden || c.run == nil {
			continue
		}
		if !strings.Contains(r.stdout, "  maiden "+c.name) || !strings.Contains(r.stdout, c.summary) {
			t.Errorf("usage lacks %s", c.name)
		}
	}
	for _, args := range [][]string{{"-h"}, {"-help"}, {"--help"}} {
		if h := cli(t, "", args...); h.code != exitOK || h.stdout != r.stdout {
			t.Errorf("%q: %+v", args, h)
		}
	}
	if v := cli(t, "", "--version"); v.code != exitOK || !strings.HasPrefix(v.stdout, "maiden ") {
		t.Errorf("--version: %+v", v)
	}
}

// TestHelpToolWithBrokenConfig: maiden help NAME with an agent.toml that
// does not load names the file's error, not "unknown command" (which hid
// why maiden help textkit failed while a test rewrote the file).
func TestHelpToolWithBrokenConfig(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(cfg, []byte("version = 1\n[tools.x]\npath = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "help", "-config", cfg, "x")
	if r.code != exitUsage || !strings.Contains(r.stderr, `"x" is not a maiden command, and the tools of `+cfg+" could not be read") || !strings.Contains(r.stderr, "tools.x.path") {
		t.Errorf("help x with a broken agent.toml: %+v", r)
	}
	// No agent.toml at all: an unknown command of maiden's, as before.
	r = cli(t, "", "help", "-config", filepath.Join(t.TempDir(), "none.toml"), "x")
	if r.code != exitUsage || !strings.Contains(r.stderr, `unknown command "x"`) {
		t.Errorf("help x without agent.toml: %+v", r)
	}
}

// TestSubcommandErrors: a parent command without (or with a wrong)
// subcommand says which exist.
func TestSubcommandErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"client"}, exitUsage, "subcommands: config"},
		{[]string{"client", "-h"}, exitOK, "subcommands: config"},
		{[]string{"client", "setup"}, exitUsage, `unknown subcommand "setup" (there is: config)`},
		{[]string{"help", "nope"}, exitUsage, `unknown command "nope"`},
		{[]string{"client config"}, exitUsage, `unknown command "client config"`},
		{[]string{"version", "extra"}, exitUsage, `unexpected argument "extra"`},
	} {
		r := cli(t, "", tt.args...)
		if r.code != tt.code || !strings.Contains(r.stdout+r.stderr, tt.want) {
			t.Errorf("%q: exit %d, want %d mentioning %q: %+v", tt.args, r.code, tt.code, tt.want, r)
		}
	}
}
