package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestNewBuildCall is the newcomer's path, for each template: `maiden new`,
// `maiden build`, `maiden call`, all from a clean temp dir. The Go build runs
// with GOPROXY=off: a new project must build with nothing but the Go
// toolchain (the SDK is vendored into it).
func TestNewBuildCall(t *testing.T) {
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	newBuildCall(t, "go")
}

// TestNewBuildCallJS is TestNewBuildCall for the JavaScript template,
// which needs none of the Go build's environment: in parallel, since it
// waits for the build TestMain started.
func TestNewBuildCallJS(t *testing.T) {
	t.Parallel()
	newBuildCall(t, "js")
}

func newBuildCall(t *testing.T, langs ...string) {
	for _, lang := range langs {
		t.Run(lang, func(t *testing.T) {
			work, dir, r, built, took := newAndBuild(t, lang, "my-"+lang+"-tool")
			name := filepath.Base(dir)
			if r.code != exitOK {
				t.Fatalf("new: %+v", r)
			}
			for _, want := range []string{"[tools." + name + "]", `path = "` + filepath.ToSlash(filepath.Join(dir, name+".wasm")) + `"`, "maiden build " + dir} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("new's output lacks %q:\n%s", want, r.stdout)
				}
			}
			for _, f := range []string{"README.md", ".gitignore", "wit/maiden-tool.wit"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}

			r = built // into the user cache: the calls below reuse the compiled code
			if r.code != exitOK {
				t.Fatalf("build: exit %d\n%s", r.code, r.stderr)
			}
			wasm := filepath.Join(dir, name+".wasm")
			fi, err := os.Stat(wasm)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s template: built in %v, component %.2f MB", lang, took.Round(10*time.Millisecond), float64(fi.Size())/1e6)
			if !strings.Contains(r.stdout, "Echoes a message back") {
				t.Errorf("build did not print the description: %q", r.stdout)
			}

			cfg := filepath.Join(work, "agent.toml")
			entry := r.stderr[strings.Index(r.stderr, "[tools."):]
			if err := os.WriteFile(cfg, []byte("version = 1\n\n"+entry), 0o644); err != nil {
				t.Fatal(err)
			}
			r = cli(t, "", "call", "-config", cfg, "-json", name, `{"message":"hi","shout":true}`)
			var res struct {
				OK     bool
				Output string
				Logs   []struct{ Level, Message string }
				Error  *struct{ Kind, Message string }
			}
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || !res.OK {
				t.Fatalf("call: exit %d, %v: %s %s", r.code, err, r.stdout, r.stderr)
			}
			if res.Output != `{"reply":"HI"}` {
				t.Errorf("output %q", res.Output)
			}
			if len(res.Logs) != 1 || res.Logs[0].Level != "info" || !strings.HasPrefix(res.Logs[0].Message, "echoing 2 ") {
				t.Errorf("logs %+v", res.Logs)
			}
			r = cli(t, "", "call", "-config", cfg, name, `{"message":""}`)
			if r.code != exitTool || !strings.Contains(r.stderr, "message is empty") {
				t.Errorf("empty message: exit %d, stderr %q", r.code, r.stderr)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no args", []string{"new"}, "usage: maiden new"},
		{"unknown language", []string{"new", "cobol", filepath.Join(t.TempDir(), "x")}, `unknown language "cobol"`},
		{"bad name", []string{"new", "go", filepath.Join(t.TempDir(), "Bad Name")}, "invalid tool name"},
		{"not empty", []string{"new", "js", nonEmpty}, "not empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := cli(t, "", tt.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", r.code, r.stderr, exitUsage, tt.want)
			}
		})
	}
	if entries, _ := os.ReadDir(nonEmpty); len(entries) != 1 {
		t.Errorf("a refused new wrote into the directory: %d entries", len(entries))
	}
}

// TestBuildGoErrors: a compile error and a package that does not use the SDK
// are the tool's fault (exit 1) with a message that says what to do.
func TestBuildGoErrors(t *testing.T) {
	t.Setenv("GOPROXY", "off")
	for _, tt := range []struct {
		name, src string
		want      string
	}{
		{"compile error", "package main\n\nfunc main() { undefinedThing() }\n", "main.go:3:15: undefined: undefinedThing"},
		{"no SDK", "package main\n\nfunc main() {}\n", "exports none of describe, schema, execute"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "broken")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for f, data := range map[string]string{"go.mod": "module broken\n\ngo 1.26\n", "main.go": tt.src} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := cli(t, "", "build", "-cache", "off", dir)
			if r.code != exitTool || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d mentioning %q", r.code, r.stderr, exitTool, tt.want)
			}
		})
	}
}

// TestBuildWatch edits a WAT tool under `maiden build -watch`: every save
// is rebuilt, a broken save is reported and watching goes on, and
// cancelling the context ends the command with exit 0.
func TestBuildWatch(t *testing.T) {
	defer func(d time.Duration) { watchInterval = d }(watchInterval)
	watchInterval = 50 * time.Millisecond

	dir := filepath.Join(t.TempDir(), "watched")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "testdata", "tools", "echo.wat"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "tool.wat"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(src)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"build", "-watch", "-cache", "off", dir}, strings.NewReader(""), &stdout, &stderr)
	}()
	waitFor := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !cond(stderr.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; stderr:\n%s", what, stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("the first build", func(s string) bool { return strings.Contains(s, "watching ") })
	if !strings.Contains(stderr.String(), "wrote ") {
		t.Fatalf("the first build did not write the tool:\n%s", stderr.String())
	}

	// A broken save: reported, and the watch goes on.
	time.Sleep(20 * time.Millisecond) // a new mtime even on coarse file systems
	write([]byte("(module\n  (func (i32.bogus)))\n"))
	// The message names the line: "line 2" before build errors took compiler form, "tool.wat:2:" since.
	waitFor("the error", func(s string) bool { return strings.Contains(s, "line 2") || strings.Contains(s, "tool.wat:2:") })

	// Fixed: rebuilt.
	write(append(src, []byte("\n;; edited\n")...))
	waitFor("the rebuild", func(string) bool { return strings.Count(stdout.String(), "Echoes") >= 2 })

	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after cancel", code)
		}
	case <-time.After(time.Minute):
		t.Fatal("build -watch did not stop after cancel")
	}
	if n := strings.Count(stdout.String(), "Echoes"); n != 2 {
		t.Errorf("stdout has %d successful loads, want 2:\n%s\nstderr:\n%s", n, stdout.String(), stderr.String())
	}
}

// newWork is a directory with an agent.toml serving echo (content as
// given, with no final newline, to show nothing is lost).
func newWork(t *testing.T, extra string) (work, cfg, before string) {
	t.Helper()
	work = t.TempDir()
	cfg = filepath.Join(work, "agent.toml")
	before = fmt.Sprintf("version = 1\n# my tools\n\n[tools.echo]\npath = %q%s", testkit.Component(t, "echo"), extra)
	if err := os.WriteFile(cfg, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	return work, cfg, before
}

// TestNewAddsToAgentTOML: -add (or -config) appends the tool's table to
// agent.toml, keeping every byte that was there; the path it writes is
// right, shown by calling the tool once a component is at that path.
func TestNewAddsToAgentTOML(t *testing.T) {
	work, cfg, before := newWork(t, "")
	t.Chdir(work)
	for _, args := range [][]string{
		{"new", "go", "greet", "-add"},                     // flags after the positionals
		{"new", "-config", cfg, "js", "tools/shout-it"},    // -config alone means add
		{"new", "-add", "go", filepath.Join(work, "abs1")}, // an absolute DIR under agent.toml's directory
	} {
		r := cli(t, "", args...)
		if r.code != exitOK || !strings.Contains(r.stdout, "added to ") {
			t.Fatalf("%q: %+v", args, r)
		}
	}
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), before+"\n") {
		t.Fatalf("the old content changed:\n%s", data)
	}
	for name, path := range map[string]string{"greet": "greet/greet.wasm", "shout-it": "tools/shout-it/shout-it.wasm", "abs1": "abs1/abs1.wasm"} {
		if !strings.Contains(string(data), fmt.Sprintf("[tools.%s]\npath = %q\ntimeout_ms = 5000\n", name, path)) {
			t.Errorf("no table for %s at %s:\n%s", name, path, data)
		}
	}
	if !strings.Contains(string(data), "[tools.shout-it]\npath = \"tools/shout-it/shout-it.wasm\"\ntimeout_ms = 5000\nmemory_mb = 128\n") {
		t.Errorf("the JS tool's memory:\n%s", data)
	}
	if fi, _ := os.Stat(cfg); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 kept", fi.Mode().Perm())
	}
	// Until built, check names the missing file; with a component there,
	// the tool answers.
	if r := cli(t, "", "check", "-config", cfg, "-cache", "off"); r.code != exitUsage || !strings.Contains(r.stderr, "tools.greet.path") {
		t.Errorf("check before build: %+v", r)
	}
	comp, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"greet/greet.wasm", "tools/shout-it/shout-it.wasm", "abs1/abs1.wasm"} {
		if err := os.WriteFile(filepath.Join(work, p), comp, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := cli(t, "", "call", "-config", cfg, "-cache", "off", "shout-it", `{"message":"hi"}`); r.code != exitOK || r.stdout != "{\"message\":\"hi\"}\n" {
		t.Errorf("call: %+v", r)
	}
}

// TestNewAddRefuses: with -add, an agent.toml that cannot take the table
// is refused before anything is created, and left as it was.
func TestNewAddRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, extra, tool, want string
	}{
		{"tool exists", "", "echo", ":4: [tools.echo] already exists"},
		{"tool exists, quoted", "\n[tools.\"greet\"]\npath = \"x.wasm\"\n", "greet", ":6: [tools.greet] already exists"},
		{"not TOML", "\npath = = 3\n", "greet", ":6:8: does not parse as TOML"},
		{"inline tools", "\n[other]\n", "greet", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			work, cfg, before := newWork(t, tt.extra)
			if tt.name == "inline tools" {
				before = "version = 1\ntools = { echo = { path = \"e.wasm\" } }\n"
				if err := os.WriteFile(cfg, []byte(before), 0o644); err != nil {
					t.Fatal(err)
				}
				tt.want = ": appending [tools.greet] would make it fail to parse"
			}
			dir := filepath.Join(work, tt.tool)
			r := cli(t, "", "new", "go", dir, "-config", cfg)
			if r.code != exitUsage || !strings.Contains(r.stderr, cfg+tt.want) || !strings.Contains(r.stderr, "nothing was created") {
				t.Errorf("exit %d, stderr %q; want exit 2 mentioning %q", r.code, r.stderr, tt.want)
			}
			if b, _ := os.ReadFile(cfg); string(b) != before {
				t.Errorf("agent.toml changed:\n%s", b)
			}
			if tt.tool != "echo" {
				if _, err := os.Stat(dir); err == nil {
					t.Error("the project was created")
				}
			}
		})
	}
}

// TestNewAsksOnlyOnATerminal: without -add, an existing agent.toml is
// changed only after a yes at the prompt, which is shown only when stdin
// is a terminal.
func TestNewAsksOnlyOnATerminal(t *testing.T) {
	defer func(f func(io.Reader) bool) { isTerminal = f }(isTerminal)
	for _, tt := range []struct {
		name     string
		terminal bool
		answer   string
		added    bool
	}{
		{"not a terminal", false, "y\n", false},
		{"yes", true, "y\n", true},
		{"enter means yes", true, "\n", true},
		{"no", true, "n\n", false},
		{"anything else is no", true, "maybe\n", false},
		{"end of input is no", true, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			isTerminal = func(io.Reader) bool { return tt.terminal }
			work, cfg, before := newWork(t, "\n")
			t.Chdir(work)
			r := cli(t, tt.answer, "new", "go", "greet")
			if r.code != exitOK {
				t.Fatalf("%+v", r)
			}
			asked := strings.Contains(r.stderr, "add [tools.greet] to agent.toml? [Y/n]")
			if asked != tt.terminal {
				t.Errorf("asked %v on a terminal %v: %q", asked, tt.terminal, r.stderr)
			}
			b, _ := os.ReadFile(cfg)
			if added := string(b) != before; added != tt.added {
				t.Errorf("added %v, want %v:\n%s", added, tt.added, b)
			}
			if !tt.added && !strings.Contains(r.stdout, "[tools.greet]\npath = \"greet/greet.wasm\"") {
				t.Errorf("not added, and the table to paste is not shown:\n%s", r.stdout)
			}
			if !tt.terminal && !strings.Contains(r.stdout, "-add to append it") {
				t.Errorf("no hint about -add:\n%s", r.stdout)
			}
		})
	}

	// -add=false never asks and never adds, even with -config.
	isTerminal = func(io.Reader) bool { return true }
	work, cfg, before := newWork(t, "")
	r := cli(t, "y\n", "new", "js", filepath.Join(work, "quiet"), "-add=false", "-config", cfg)
	if b, _ := os.ReadFile(cfg); r.code != exitOK || string(b) != before || strings.Contains(r.stderr, "[Y/n]") {
		t.Errorf("-add=false: %+v", r)
	}
}

// TestNewAddCreatesAgentTOML: -add with no agent.toml creates one that
// loads once the tool is built; through a symlink, the target is written.
func TestNewAddCreatesAgentTOML(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	cfg := filepath.Join(work, "conf", "agent.toml")
	r := cli(t, "", "new", "go", filepath.Join(work, "conf", "greet"), "-config", cfg)
	if r.code != exitOK || !strings.Contains(r.stdout, "created "+cfg) {
		t.Fatalf("%+v", r)
	}
	comp, _ := os.ReadFile(testkit.Component(t, "echo"))
	if err := os.WriteFile(filepath.Join(work, "conf", "greet", "greet.wasm"), comp, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "", "check", "-config", cfg, "-cache", "off"); r.code != exitOK {
		t.Errorf("check: %+v", r)
	}

	link := filepath.Join(work, "agent.toml")
	if err := os.Symlink(cfg, link); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "", "new", "js", filepath.Join(work, "conf", "other"), "-config", link); r.code != exitOK {
		t.Fatalf("%+v", r)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced by a file")
	}
	if b, _ := os.ReadFile(cfg); !strings.Contains(string(b), "[tools.other]") {
		t.Errorf("target not updated:\n%s", b)
	}
}

// TestNewAndBuildSuggestWhatWorks (issue 27, rough edge 5): maiden new
// without an agent.toml suggests the call only after the table it needs,
// without a -config naming a file that does not exist; maiden build names
// the tool agent.toml already has at that path instead of asking to add it
// again, and otherwise gives the path relative to agent.toml.
func TestNewAndBuildSuggestWhatWorks(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	r := cli(t, "", "new", "go", "greet")
	if r.code != exitOK || strings.Contains(r.stdout, "-config agent.toml") ||
		!strings.HasSuffix(r.stdout, "\nthen:\n  maiden call greet '{\"message\":\"hi\",\"shout\":true}'\n") ||
		!strings.Contains(r.stdout, "add it to agent.toml (there is no agent.toml here: save this as agent.toml, with the line version = 1 above it):") {
		t.Fatalf("new without agent.toml: %+v", r)
	}
	var b strings.Builder
	suggestTable(&b, "agent.toml", "greet", "greet/greet.wasm")
	if want := "add it to agent.toml (which does not exist yet: start it with the line version = 1) (path relative to its directory):\n\n[tools.greet]\npath = \"greet/greet.wasm\"\n"; b.String() != want {
		t.Errorf("build without agent.toml:\n%s\nwant\n%s", b.String(), want)
	}
	if err := os.WriteFile("greet/greet.wasm", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("agent.toml", []byte("version = 1\n[tools.greet]\npath = \"greet/greet.wasm\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	suggestTable(&b, "agent.toml", "greet", filepath.Join(work, "greet", "greet.wasm"))
	if want := "agent.toml's [tools.greet] runs it: maiden call greet '{...}'\n"; b.String() != want {
		t.Errorf("build of a tool agent.toml has: %q, want %q", b.String(), want)
	}
}
