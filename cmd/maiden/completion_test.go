package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// This test binary doubles as the maiden command for a test that runs it
// as a client would: with MAIDEN_TEST_AS_CLI=1 it is maiden (init runs
// before TestMain). The shells of the completion tests run the maiden
// binary itself (maidenOnPath). Workers it starts get an empty
// environment, so they are workers, not CLIs.
func init() {
	if os.Getenv("MAIDEN_TEST_AS_CLI") == "1" {
		maiden.WorkerMain()
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// maidenOnPath returns the environment of a process that finds the maiden
// binary as "maiden" on its PATH: a link to the one testkit.Binary builds
// from these sources (not this race test binary acting as maiden, which
// starts in seconds on a loaded machine, and each shell completion starts
// it again).
func maidenOnPath(t *testing.T) []string {
	t.Helper()
	bin := testkit.Binary(t, "./cmd/maiden")
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "maiden")); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// needShell finds a shell; make test installs zsh and fish (scripts/deps), so a missing
// one is a failure, not a skip.
func needShell(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not in PATH: these tests run the completion script in the real shell (apt-get install %s; make test does, see scripts/deps)", name, name)
	}
	return p
}

func words(c completion) []string {
	var w []string
	for _, x := range c.words {
		w = append(w, x.word)
	}
	return w
}

func TestCompleteArgs(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"echo": "", "logger": ""})
	opsCfg := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(opsCfg, []byte("version = 1\n\n[operators.bob]\n\n[operators.alice]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		words []string
		kind  completeKind
		want  []string
	}{
		{"commands", []string{""}, completeWords, []string{"check", "tools", "call", "new", "build", "serve", "agents", "cards", "pending", "approve", "deny", "sessions", "audit", "state", "cache", "operators", "mcp", "add", "pull", "publish", "client", "completion", "version", "help"}},
		{"audit subcommands", []string{"audit", ""}, completeWords, []string{"verify", "tail", "export", "whatif"}},
		{"operators subcommands", []string{"operators", ""}, completeWords, []string{"token", "ls", "revoke-token"}},
		{"cache subcommands", []string{"cache", ""}, completeWords, []string{"show", "trim", "clear"}},
		{"cache show flags", []string{"cache", "show", "-"}, completeWords, []string{"-cache", "-json"}},
		{"audit tail flags", []string{"audit", "tail", "-"}, completeWords, []string{"-cache", "-config", "-f", "-isolation", "-json", "-n", "-state", "-v"}},
		{"approve flags", []string{"approve", "apr_1", "-al"}, completeWords, []string{"-always"}},
		{"deny flags", []string{"deny", "-r"}, completeWords, []string{"-reason"}},
		{"operators of -config", []string{"operators", "token", "-config", opsCfg, ""}, completeWords, []string{"alice", "bob"}},
		{"command prefix", []string{"c"}, completeWords, []string{"check", "call", "cards", "cache", "client", "completion"}},
		{"hidden command not offered", []string{"__"}, completeWords, nil},
		{"unknown command", []string{"frob", ""}, completeWords, nil},
		{"subcommand", []string{"client", ""}, completeWords, []string{"config"}},
		{"client names", []string{"client", "config", ""}, completeWords, []string{"claude", "cursor", "vscode"}},
		{"client name prefix", []string{"client", "config", "c"}, completeWords, []string{"claude", "cursor"}},
		{"flags of a subcommand", []string{"client", "config", "cursor", "-w"}, completeWords, []string{"-write"}},
		{"flags", []string{"call", "-"}, completeWords, []string{"-agent", "-cache", "-config", "-isolation", "-json", "-state", "-v", "-wait"}},
		{"double-dash flags", []string{"serve", "--ht"}, completeWords, []string{"--http"}},
		{"choices of a flag", []string{"serve", "-isolation", ""}, completeWords, []string{"workers", "process"}},
		{"choices after =", []string{"serve", "-isolation=p"}, completeWords, []string{"-isolation=process"}},
		{"a FILE flag", []string{"check", "-config", "ag"}, completeFiles, nil},
		{"a FILE flag after =", []string{"check", "-config=ag"}, completeFiles, nil},
		{"a DIR flag", []string{"tools", "-cache", ""}, completeDirs, nil},
		{"a bool flag takes no value", []string{"tools", "-json", ""}, completeWords, nil},
		{"bool after =", []string{"new", "go", "x", "-add="}, completeWords, []string{"-add=true", "-add=false"}},
		{"languages", []string{"new", ""}, completeWords, []string{"go", "js", "js-command", "middleware-go", "middleware-js"}},
		{"new's DIR", []string{"new", "go", ""}, completeDirs, nil},
		{"flags after positionals (interspersed)", []string{"new", "go", "x", "-ad"}, completeWords, []string{"-add"}},
		{"no flags after a positional (call)", []string{"call", "echo", "-"}, completeWords, nil},
		{"tools of -config", []string{"call", "-config", cfg, ""}, completeWords, []string{"echo", "logger"}},
		{"tools of -config=, prefix", []string{"call", "-config=" + cfg, "-json", "e"}, completeWords, []string{"echo"}},
		{"no tools without agent.toml", []string{"call", "-config", filepath.Join(t.TempDir(), "none.toml"), ""}, completeWords, nil},
		{"INPUT is not completed", []string{"call", "-config", cfg, "echo", ""}, completeWords, nil},
		{"after --", []string{"completion", "--", "-"}, completeWords, nil},
		{"shells", []string{"completion", ""}, completeWords, []string{"bash", "zsh", "fish"}},
		{"build's source", []string{"build", "-watch", ""}, completeFiles, nil},
		{"help topics", []string{"help", "se"}, completeWords, []string{"serve", "sessions"}},
		{"unknown flag value skipped", []string{"serve", "-nope", ""}, completeWords, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := completeArgs(tt.words)
			if got.kind != tt.kind {
				t.Errorf("kind %s, want %s", completeKindNames[got.kind], completeKindNames[tt.kind])
			}
			if diff := cmp.Diff(tt.want, words(got)); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompletionFollowsTheFlags: completion offers exactly the flags each
// command's -h lists, and a flag added to a command shows up with no other
// change (there is no list of flags to keep in step).
func TestCompletionFollowsTheFlags(t *testing.T) {
	for _, c := range commands {
		if c.hidden || c.run == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			r := cli(t, "", append(strings.Fields(c.name), "-h")...)
			var listed []string
			_, flagsPart, _ := strings.Cut(r.stderr, "\nFlags:\n")
			for _, l := range strings.Split(flagsPart, "\n") {
				if strings.HasPrefix(l, "  -") {
					listed = append(listed, strings.Fields(l)[0])
				}
			}
			got := words(completeArgs(append(strings.Fields(c.name), "-")))
			if diff := cmp.Diff(listed, got); diff != "" {
				t.Errorf("flags in -h vs completion (-h +completion):\n%s", diff)
			}
		})
	}

	// A command that gains a flag.
	commands = append(commands, &command{name: "gadget", args: "[-brand-new]", summary: "a test command",
		run: func(_ context.Context, args []string, _ io.Reader, _, stderr io.Writer) int {
			fs, _ := newFlags("gadget", stderr)
			fs.Bool("brand-new", false, "a flag no script knows")
			if err := fs.Parse(args); err != nil {
				return parseFailed(err)
			}
			return exitOK
		}})
	defer func() { commands = commands[:len(commands)-1] }()
	if got := words(completeArgs([]string{"gad"})); !slices.Equal(got, []string{"gadget"}) {
		t.Errorf("new command: %q", got)
	}
	if got := words(completeArgs([]string{"gadget", "-br"})); !slices.Equal(got, []string{"-brand-new"}) {
		t.Errorf("new flag: %q", got)
	}
}

// TestCompleteCommand: the hidden command the scripts call prints the kind,
// then candidate TAB description lines.
func TestCompleteCommand(t *testing.T) {
	t.Parallel()
	r := cli(t, "", "__complete", "serve", "-isol")
	if r.code != exitOK || r.stdout != "words\n-isolation\twhere tool code runs\n" {
		t.Errorf("%+v", r)
	}
	r = cli(t, "", "__complete", "check", "-config", "")
	if r.code != exitOK || r.stdout != "files\n" {
		t.Errorf("%+v", r)
	}
	if r := cli(t, "", "help"); strings.Contains(r.stdout, "__complete") {
		t.Error("usage lists the hidden command")
	}
}

func TestCompletionCommand(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := cli(t, "", "completion", sh)
		if r.code != exitOK || !strings.Contains(r.stdout, "__complete") || r.stderr != "" {
			t.Errorf("%s: %+v", sh, r)
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "powershell"}, {"completion", "bash", "zsh"}} {
		r := cli(t, "", args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "bash") {
			t.Errorf("%q: %+v", args, r)
		}
	}
	if r := cli(t, "", "completion", "powershell"); !strings.Contains(r.stderr, `unknown shell "powershell"`) {
		t.Errorf("%+v", r)
	}
}

// shellRun runs script in shell with maiden (this binary) on the PATH.
func shellRun(t *testing.T, env []string, shell string, args ...string) string {
	t.Helper()
	cmd := exec.Command(shell, args...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", shell, args, err, out)
	}
	return string(out)
}

// TestBashCompletion sources the script in a real bash and calls the
// completion function as bash does on Tab: COMP_WORDS split at "=" (as
// readline's COMP_WORDBREAKS does), COMP_LINE, COMP_POINT.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	bash := needShell(t, "bash")
	env := maidenOnPath(t)
	cfg := agentTOML(t, map[string]string{"echo": ""})
	dir := t.TempDir()
	for _, f := range []string{"agent.toml", "other.toml"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := `
source <(maiden completion bash) || exit 1
complete -p maiden
comp() {
  COMP_LINE=$1; COMP_POINT=${#1}
  local l=${1//=/ = }
  read -r -a COMP_WORDS <<<"$l"
  [[ $1 == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
  COMPREPLY=()
  _maiden
  printf '%s => %s\n' "$1" "${COMPREPLY[*]}"
}
comp "maiden se"
comp "maiden client "
comp "maiden client config cu"
comp "maiden serve -iso"
comp "maiden serve -isolation "
comp "maiden serve -isolation=pr"
comp "maiden new go x -a"
comp "maiden call -config ` + cfg + ` e"
comp "maiden check -config ` + dir + `/ag"
comp "maiden check -config=` + dir + `/ot"
`
	out := shellRun(t, env, bash, "--norc", "--noprofile", "-c", script)
	for _, want := range []string{
		"complete -F _maiden maiden\n",
		"maiden se => serve sessions\n",
		"maiden client  => config\n",
		"maiden client config cu => cursor\n",
		"maiden serve -iso => -isolation\n",
		"maiden serve -isolation  => workers process\n",
		"maiden serve -isolation=pr => process\n", // bash's word is what follows "="
		"maiden new go x -a => -add\n",
		" e => echo\n",
		"/ag => " + dir + "/agent.toml\n",
		"/ot => " + dir + "/other.toml\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("bash output lacks %q:\n%s", want, out)
		}
	}
}

// TestZshCompletion: zsh parses the script; then, with zsh's completion
// builtins replaced by functions that print what they are given, the
// script's _maiden hands zsh the right candidates for a line.
func TestZshCompletion(t *testing.T) {
	t.Parallel()
	zsh := needShell(t, "zsh")
	env := maidenOnPath(t)
	script := filepath.Join(t.TempDir(), "_maiden")
	if err := os.WriteFile(script, []byte(cli(t, "", "completion", "zsh").stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	shellRun(t, env, zsh, "-n", script)
	out := shellRun(t, env, zsh, "-f", "-c", `
_describe() { local n=${@[-1]}; print -rl -- "${(@P)n}"; }
_files() { print -r -- "FILES $*"; }
compset() { print -r -- "COMPSET $*"; }
compdef() { print -r -- "COMPDEF $*"; }
source `+script+`
for line in "maiden se" "maiden serve -isolation " "maiden client config " "maiden serve -config=/tmp/x" "maiden new go "; do
  words=(${(z)line}); [[ $line == *" " ]] && words+=("")
  CURRENT=${#words}; PREFIX=${words[-1]}
  print -r -- "== $line"; _maiden
done`)
	want := `COMPDEF _maiden maiden
== maiden se
serve:serve the tools over MCP (stdio, or streamable HTTP at ADDR/mcp)
sessions:the sessions in the state store and their sandbox boundaries
== maiden serve -isolation 
workers
process
== maiden client config 
claude:Claude Desktop
cursor:Cursor
vscode:VS Code
== maiden serve -config=/tmp/x
COMPSET -P *=
FILES 
== maiden new go 
FILES -/
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("zsh (-want +got):\n%s", diff)
	}
}

// TestFishCompletion: fish parses the script and, asked to complete a line
// (complete -C, what Tab does), answers from maiden.
func TestFishCompletion(t *testing.T) {
	t.Parallel()
	fish := needShell(t, "fish")
	env := maidenOnPath(t)
	script := filepath.Join(t.TempDir(), "maiden.fish")
	if err := os.WriteFile(script, []byte(cli(t, "", "completion", "fish").stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	shellRun(t, env, fish, "--no-execute", script)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agent.toml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := shellRun(t, env, fish, "--no-config", "-c", "source "+script+`
for line in "maiden se" "maiden serve -isolation " "maiden serve -isolation=w" "maiden client config v" "maiden check -config `+dir+`/ag" "maiden check -config=`+dir+`/ag"
  echo "== $line"; complete -C "$line"
end`)
	want := "== maiden se\nserve\tserve the tools over MCP (stdio, or streamable HTTP at ADDR/mcp)\n" +
		"sessions\tthe sessions in the state store and their sandbox boundaries\n" +
		"== maiden serve -isolation \nprocess\nworkers\n" +
		"== maiden serve -isolation=w\n-isolation=workers\n" +
		"== maiden client config v\nvscode\tVS Code\n" +
		"== maiden check -config " + dir + "/ag\n" + dir + "/agent.toml\n" +
		"== maiden check -config=" + dir + "/ag\n-config=" + dir + "/agent.toml\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("fish (-want +got):\n%s", diff)
	}
}
