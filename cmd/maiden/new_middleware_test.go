package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/toolbuild"
	"github.com/maiden-run/maiden/wit"
)

// TestNewMiddlewareBuildCall is the operator's path for each middleware
// template: `maiden new middleware-*`, `maiden build`, then calls of a tool
// that the new middleware guards, through the real call path.
func TestNewMiddlewareBuildCall(t *testing.T) {
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	newMiddlewareBuildCall(t, "middleware-go")
}

// TestNewMiddlewareBuildCallJS is TestNewMiddlewareBuildCall for the
// JavaScript template, which needs none of the Go build's environment: in
// parallel, since it waits for the build TestMain started.
func TestNewMiddlewareBuildCallJS(t *testing.T) {
	t.Parallel()
	newMiddlewareBuildCall(t, "middleware-js")
}

func newMiddlewareBuildCall(t *testing.T, tmpls ...string) {
	for _, tmpl := range tmpls {
		t.Run(tmpl, func(t *testing.T) {
			work, dir, r, built, _ := newAndBuild(t, tmpl, "guard")
			if r.code != exitOK {
				t.Fatalf("new: %+v", r)
			}
			for _, want := range []string{"a Go middleware named guard", "[middleware.guard]", `use = "guard"`, "maiden build " + dir} {
				if tmpl == "middleware-js" {
					want = strings.Replace(want, "a Go", "a JavaScript", 1)
				}
				if !strings.Contains(r.stdout, want) {
					t.Errorf("new's output lacks %q:\n%s", want, r.stdout)
				}
			}
			for _, f := range []string{"README.md", ".gitignore", "wit/maiden-middleware.wit"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
			if _, err := os.Stat(filepath.Join(work, "agent.toml")); err == nil {
				t.Error("maiden new middleware wrote an agent.toml")
			}

			r = built
			if r.code != exitOK || !strings.Contains(r.stdout, "guard: Refuses Atlantis") {
				t.Fatalf("build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			checkMiddlewareWorld(t, filepath.Join(dir, "guard.wasm"))
			i := strings.Index(r.stderr, "[middleware.guard]")
			if i < 0 {
				t.Fatalf("build did not print the middleware's table:\n%s", r.stderr)
			}
			// agent.toml in a directory of this run's own: the built
			// project is shared by -count repeats, and the check above
			// looks for an agent.toml in it.
			cfg := filepath.Join(t.TempDir(), "agent.toml")
			// The printed table's timeout_ms (1000) is the default for a
			// user's machine; this test is about the template's verdicts,
			// and a JS hook in a worker on a CI machine running four test
			// binaries on two cores can take longer than a second.
			table := strings.Replace(r.stderr[i:], "timeout_ms = 1000", "timeout_ms = 30000", 1)
			if table == r.stderr[i:] {
				t.Fatalf("the printed table has no timeout_ms = 1000:\n%s", r.stderr[i:])
			}
			toml := "version = 1\n\n[tools.echo]\npath = " + quote(testkit.Component(t, "echo")) +
				"\n\n[tools.leaky]\npath = " + quote(testkit.Component(t, "go/leaky")) + "\ntimeout_ms = 30000\n\n" + table
			if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
				t.Fatal(err)
			}
			callTool := func(tool, input string) (res callResult) {
				t.Helper()
				r := cli(t, "", "call", "-config", cfg, "-json", tool, input)
				if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
					t.Fatalf("call %s: exit %d, %v: %s %s", input, r.code, err, r.stdout, r.stderr)
				}
				if !res.OK {
					t.Logf("call %s: the operator's log:\n%s", input, r.stderr)
				}
				return res
			}
			call := func(input string) callResult { t.Helper(); return callTool("echo", input) }
			if res := call(`{"message":"hi","city":"Atlantis"}`); res.OK || res.Error == nil || res.Error.Kind != "denied" || res.Error.Message != "Atlantis is not on any map" {
				t.Errorf("Atlantis: %+v", res)
			}
			if res := call(`{"message":"hi","city":"Oslo"}`); !res.OK || res.Output != `{"message":"hi","city":"Oslo"}` {
				t.Errorf("Oslo: %+v", res)
			}
			// The echo tool shows the input it ran with: the rewritten one.
			if res := call(`{"message":"hi","city":"paris"}`); !res.OK || !strings.Contains(res.Output, `"city":"Paris"`) {
				t.Errorf("paris: %+v", res)
			}
			if res := call(`{"message":"my password"}`); !res.OK || res.Output != "[withheld by echo's middleware: the output mentioned a password]" {
				t.Errorf("password: %+v", res)
			}
			// The tool ran: a failure and the log lines get the same check
			// (the failed phase; a reject withholds the lines).
			for input, want := range map[string]string{
				`{"fail":"bad password 1234"}`:                      "withheld by leaky's middleware: its error mentioned a password",
				`{"log":["the password is 1234"],"output":"fine"}`:  "withheld by leaky's middleware: its log mentioned a password",
				`{"log":["the password is 1234"],"fail":"gave up"}`: "withheld by leaky's middleware: its log mentioned a password",
			} {
				if res := callTool("leaky", input); res.OK || res.Error == nil || res.Error.Kind != "denied" || res.Error.Message != want || strings.Contains(fmt.Sprint(res), "1234") {
					t.Errorf("leaky %s: %+v, want denied %q", input, res, want)
				}
			}
			if res := callTool("leaky", `{"log":["working"],"fail":"gave up"}`); res.OK || res.Error == nil || res.Error.Kind != "tool" || res.Error.Message != "gave up" {
				t.Errorf("a harmless failure: %+v, want the tool's own", res)
			}
		})
	}
}

// callResult is `maiden call -json`'s result; %+v prints the error's kind
// and message, not a pointer.
type callResult struct {
	OK     bool
	Output string
	Error  *callError
	Logs   []struct{ Message string }
}

type callError struct{ Kind, Message string }

func (e *callError) String() string {
	if e == nil {
		return "<nil>"
	}
	return e.Kind + ": " + e.Message
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// checkMiddlewareWorld: a middleware built from a template exports the
// middleware contract (describe, handle) and imports the middleware's log
// and WASI only, never the tool's host, wasi:http or sockets.
func checkMiddlewareWorld(t *testing.T, path string) {
	t.Helper()
	comp, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := toolbuild.EnsureToolchain(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	witText, err := tc.WIT(t.Context(), comp)
	if err != nil {
		t.Fatal(err)
	}
	var imports, exports []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(import|export) (.+);\s*$`).FindAllStringSubmatch(witText, -1) {
		if m[1] == "import" {
			imports = append(imports, m[2])
		} else {
			exports = append(exports, m[2])
		}
	}
	slices.Sort(exports)
	if want := []string{"describe: func() -> string", "handle: func(event: string) -> result<string, string>"}; !slices.Equal(exports, want) {
		t.Errorf("exports %q, want %q", exports, want)
	}
	hasLog := false
	for _, imp := range imports {
		switch {
		case imp == wit.Middleware.HostInterface:
			hasLog = true
		case strings.HasPrefix(imp, "maiden:tool/"), strings.HasPrefix(imp, "wasi:http/"), strings.HasPrefix(imp, "wasi:sockets/"), !strings.HasPrefix(imp, "wasi:"):
			t.Errorf("a middleware imports %s", imp)
		}
	}
	if !hasLog {
		t.Errorf("imports %v: want %s (the template logs)", imports, wit.Middleware.HostInterface)
	}
}

// TestNewMiddlewareRefusesAdd: a middleware's place in the chain is the
// operator's choice, so -add is refused before anything is created.
func TestNewMiddlewareRefusesAdd(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "guard")
	r := cli(t, "", "new", "middleware-go", dir, "-add")
	if r.code != exitUsage || !strings.Contains(r.stderr, "-add adds tools only") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a refused new created the directory")
	}
}
