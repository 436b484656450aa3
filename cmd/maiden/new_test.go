package main

import (
	"context"
	"encoding/json"
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
	for _, lang := range []string{"go", "js"} {
		t.Run(lang, func(t *testing.T) {
			work := t.TempDir()
			dir := filepath.Join(work, "my-"+lang+"-tool")
			name := filepath.Base(dir)
			r := cli(t, "", "new", lang, dir)
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

			start := time.Now()
			r = cli(t, "", "build", dir) // the user cache: the calls below reuse the compiled code
			if r.code != exitOK {
				t.Fatalf("build: exit %d\n%s", r.code, r.stderr)
			}
			wasm := filepath.Join(dir, name+".wasm")
			fi, err := os.Stat(wasm)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s template: built in %v, component %.2f MB", lang, time.Since(start).Round(10*time.Millisecond), float64(fi.Size())/1e6)
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
	waitFor("the error", func(s string) bool { return strings.Contains(s, "line 2") })

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
