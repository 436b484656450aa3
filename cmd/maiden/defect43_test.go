package main

// Pass 43's three defects, each test red on the code before its fix:
// shell completion offered an agent.toml's names whatever they held, maiden
// new -add replaced another user's agent.toml, maiden build printed the
// project's paths raw and wrote them into its check's agent.toml with Go's
// %q, which TOML does not read. The comments below say what the code did.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCompletionLeavesOutNamesConfigRefuses: `maiden __complete call ""`
// reads a workspace's agent.toml as TOML only and prints its [tools.NAME]
// keys as candidates, whatever they hold. A cloned repository's agent.toml
// can name a tool with a newline (a second candidate line, with a
// description after a tab), an escape sequence (the shell's menu prints it
// to the terminal) or shell syntax (bash inserts the word unquoted on the
// command line). config refuses every such name (toolNameRE), so no real
// tool can have one.
func TestCompletionLeavesOutNamesConfigRefuses(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	toml := "version = 1\n[tools.\"x\\u001b]0;owned\\u0007\"]\npath = \"a.wasm\"\n[tools.\"y\\n$(touch owned)\\tinjected\"]\npath = \"b.wasm\"\n"
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "__complete", "call", "-config", cfg, "")
	if strings.ContainsAny(r.stdout, "\x1b\a") || strings.Contains(r.stdout, "\n$(touch owned)") {
		t.Errorf("completion candidates of a hostile agent.toml: %q; want names config would refuse left out (or escaped)", r.stdout)
	}
}

// TestAddRefusesOtherUsersAgentTOML: `maiden new -add` (and
// `maiden add`, through the same appendToolTable) rewrites agent.toml by a
// rename without asking who owns it: root adding a tool to a user's
// agent.toml (or to the file a symlink there leads to) takes the file from
// its owner, which `client config -write` refuses
// (TestClientConfigWriteRefusesOtherUsersFile).
func TestAddRefusesOtherUsersAgentTOML(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(cfg, []byte("version = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	if err := os.Chown(cfg, nobody, nobody); err != nil {
		t.Skipf("cannot give a file to another user here (not root): %v", err)
	}
	dir := filepath.Join(t.TempDir(), "greet")
	r := cli(t, "", "new", "js", dir, "-add", "-config", cfg)
	fi, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != nobody || r.code == 0 || !strings.Contains(r.stderr, "owned by uid 65534, not by you") {
		t.Errorf("maiden new -add with agent.toml owned by uid %d: exit %d, the file now owned by uid %d; want it refused, naming the owner, the file left to uid %d (stderr %q)", nobody, r.code, uid, nobody, r.stderr)
	}
	// Refused before anything is made, as any other reason the table
	// cannot be added is (and never offered at the prompt).
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(r.stderr, "nothing was created") {
		t.Errorf("maiden new -add with agent.toml owned by uid %d: the project %s (stat: %v), stderr %q; want nothing created", nobody, dir, err, r.stderr)
	}
}

// TestBuildEscapesProjectPath: `maiden build DIR` prints the
// project's name and paths raw ("building NAME (WAT) from SOURCE", "wrote
// OUT", and the check's error quoting the path), while it escapes the
// tool's own text (TestBuildEscapesToolText): a directory of a cloned
// repository named with escape sequences drives the terminal of whoever
// builds it.
func TestBuildEscapesProjectPath(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tools", "echo.wat"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "e\x1b]0;owned\a\x1b[2J")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tool.wat"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "build", "-cache", "off", "-isolation", "process", dir)
	if strings.ContainsAny(r.stdout+r.stderr, "\x1b\a") || r.code != 0 {
		t.Errorf("maiden build of a directory named with escapes: exit %d, stderr %q; want it built (the check's agent.toml parsing), its name escaped", r.code, r.stderr)
	}
}

// Pass 43's open plant B1 (the toolchain's build error printed without
// escaping), reachable once a WAT syntax error quoting a control character
// reached maiden at all (it was lost to the toolchain's JSON before): the
// error names the line and reaches the terminal escaped.
func TestBuildEscapesTheToolchainsError(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "bad")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wat := "(module\n  (func (export \"describe\") (result i32)\n    i32.bo\x1b]0;owned\agus))\n"
	if err := os.WriteFile(filepath.Join(dir, "tool.wat"), []byte(wat), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "build", "-cache", "off", "-isolation", "process", dir)
	if r.code == 0 || !strings.Contains(r.stderr, "tool.wat:3:") || !strings.Contains(r.stderr, `i32.bo\x1b]0;owned\agus`) || strings.ContainsAny(r.stdout+r.stderr, "\x1b\a") {
		t.Errorf("maiden build of a WAT file whose bad instruction holds escape sequences: exit %d, stderr %q; want a failure naming tool.wat:3, the instruction quoted escaped", r.code, r.stderr)
	}
}
