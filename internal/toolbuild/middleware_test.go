package toolbuild

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maiden-run/maiden/internal/mwproto"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/wit"
)

var middlewareExports = []string{
	"describe: func() -> string",
	"handle: func(event: string) -> result<string, string>",
}

// TestMiddlewareTemplatesBuild creates each middleware template with
// NewProject, builds it as maiden build does, checks the component's world
// and runs it: it must reject Atlantis, rewrite a lower-case city, pass
// others, and rewrite an output that mentions a password.
func TestMiddlewareTemplatesBuild(t *testing.T) {
	tc := toolchain(t)
	sb, err := sandbox.New(&sandbox.Options{CacheDir: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() }) // after the parallel subtests, unlike a defer
	for _, tmpl := range MiddlewareTemplates {
		t.Run(string(tmpl), func(t *testing.T) {
			t.Parallel() // each in its own directory; the sandbox takes concurrent calls
			dir := filepath.Join(t.TempDir(), "guard")
			p, files, err := NewProject(dir, tmpl)
			if err != nil {
				t.Fatal(err)
			}
			if p.Lang != templateLang(tmpl) || !strings.Contains(" "+strings.Join(files, " ")+" ", " wit/maiden-middleware.wit ") {
				t.Fatalf("project %+v, files %v", p, files)
			}
			for _, f := range files {
				if f == "wit/maiden-tool.wit" {
					t.Errorf("a middleware project got the tool contract")
				}
			}
			readme, _ := os.ReadFile(filepath.Join(dir, "README.md"))
			for _, want := range []string{`{"verdict": "reject", "message": "text the agent sees"}`, `"phase": "before"`, "[middleware.guard]", `use = "guard"`} {
				if !strings.Contains(string(readme), want) {
					t.Errorf("README lacks %q", want)
				}
			}
			out := p.DefaultOutput()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := tc.Build(ctx, p, out); err != nil {
				t.Fatal(err)
			}
			comp, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			witText, err := tc.WIT(ctx, comp)
			if err != nil {
				t.Fatal(err)
			}
			w := parseWorld(witText)
			if diff := cmp.Diff(middlewareExports, w.Exports); diff != "" {
				t.Errorf("exports (-want +got):\n%s", diff)
			}
			hasLog := false
			for _, imp := range w.Imports {
				switch {
				case imp == wit.Middleware.HostInterface:
					hasLog = true
				case strings.HasPrefix(imp, "maiden:tool/"), strings.HasPrefix(imp, "wasi:http/"), strings.HasPrefix(imp, "wasi:sockets/"), !strings.HasPrefix(imp, "wasi:"):
					t.Errorf("a middleware imports %s", imp)
				}
			}
			if !hasLog {
				t.Errorf("imports %v: want %s (the template logs)", w.Imports, wit.Middleware.HostInterface)
			}

			lim := sandbox.Limits{Timeout: 5 * time.Second, Memory: 128 << 20}
			tool, err := sb.Open(ctx, out, lim)
			if err != nil {
				t.Fatal(err)
			}
			if tool.World != sandbox.WorldMiddleware || !strings.Contains(tool.Description, "Refuses Atlantis") {
				t.Fatalf("info %+v", tool.Info)
			}
			for _, c := range []struct {
				phase         mwproto.Phase
				input, output string
				want          string // verdict kind, then its message, input or output
			}{
				{mwproto.Before, `{"city":"Atlantis"}`, "", "reject Atlantis is not on any map"},
				{mwproto.Before, `{"city":"paris","days":3}`, "", `rewrite {"city":"Paris","days":3}`},
				{mwproto.Before, `{"city":"Oslo"}`, "", "pass "},
				{mwproto.After, `{"city":"Oslo"}`, "sunny", "pass "},
				{mwproto.After, `{"city":"Oslo"}`, "the Password is 1234", "rewrite [withheld by weather's middleware: the output mentioned a password]"},
			} {
				ev, err := mwproto.Event{Phase: c.phase, Tool: "weather", Agent: "alice", Input: json.RawMessage(c.input), Output: c.output}.JSON()
				if err != nil {
					t.Fatal(err)
				}
				res, err := tool.Execute(ctx, sandbox.Call{Limits: lim, Input: ev})
				if err != nil || res.Failure != nil {
					t.Fatalf("%s %s: %+v, %v", c.phase, c.input, res.Failure, err)
				}
				v, err := mwproto.ParseVerdict(c.phase, res.Output)
				if err != nil {
					t.Fatalf("%s %s: %v", c.phase, c.input, err)
				}
				if got := string(v.Kind) + " " + v.Message + string(v.Input) + v.Output; got != c.want {
					t.Errorf("%s %s %q: verdict %q, want %q", c.phase, c.input, c.output, got, c.want)
				}
			}
		})
	}
}

// TestMiddlewareGoTemplateOnHost runs go vet and go test in a new Go
// middleware project with the module proxy off, like TestGoTemplateOnHost.
func TestMiddlewareGoTemplateOnHost(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hostmw")
	if _, _, err := NewProject(dir, TemplateMiddlewareGo); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"vet", "./..."}, {"test", "./..."}, {"mod", "tidy", "-diff"}} {
		cmd := exec.CommandContext(ctxFor(t), "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestMiddlewareGoDetection: a package is built as a middleware when it
// calls the SDK's Middleware, under any import name, and not otherwise.
func TestMiddlewareGoDetection(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"default name", map[string]string{"main.go": "package main\nimport maiden \"github.com/maiden-run/maiden/sdk/go\"\nfunc init() { maiden.Middleware(\"d\", nil) }\nfunc main() {}\n"}, true},
		{"renamed", map[string]string{"main.go": "package main\nimport m \"github.com/maiden-run/maiden/sdk/go\"\nfunc init() { m.Middleware(\"d\", nil) }\n"}, true},
		{"dot import", map[string]string{"main.go": "package main\nimport . \"github.com/maiden-run/maiden/sdk/go\"\nfunc init() { Middleware(\"d\", nil) }\n"}, true},
		{"in another file", map[string]string{"main.go": "package main\nfunc main() {}\n", "mw.go": "package main\nimport maiden \"github.com/maiden-run/maiden/sdk/go\"\nvar _ = func() int { maiden.Middleware(\"d\", nil); return 0 }()\n"}, true},
		{"a tool", map[string]string{"main.go": "package main\nimport maiden \"github.com/maiden-run/maiden/sdk/go\"\nfunc init() { maiden.Register(nil) }\n"}, false},
		{"another package's Middleware", map[string]string{"main.go": "package main\nimport maiden \"example.com/other\"\nfunc init() { maiden.Middleware(\"d\", nil) }\n"}, false},
		{"only in a test", map[string]string{"main.go": "package main\n", "main_test.go": "package main\nimport maiden \"github.com/maiden-run/maiden/sdk/go\"\nfunc init() { maiden.Middleware(\"d\", nil) }\n"}, false},
		{"only for another GOOS", map[string]string{"main.go": "package main\n", "mw_linux.go": "package main\nimport maiden \"github.com/maiden-run/maiden/sdk/go\"\nfunc init() { maiden.Middleware(\"d\", nil) }\n"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			got, err := goCallsMiddleware(dir)
			if err != nil || got != tt.want {
				t.Errorf("goCallsMiddleware = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestMiddlewareJSErrors: a JS module is a middleware when it exports handle
// and not execute; one that forgets describe is told what a middleware
// exports, before the slow componentize step.
func TestMiddlewareJSErrors(t *testing.T) {
	tc := toolchain(t)
	_, err := tc.ComponentFromJS(ctxFor(t), []byte("export function handle(event) { return '{\"verdict\":\"pass\"}'; }\n"))
	if err == nil || !strings.Contains(err.Error(), "does not export describe (a middleware must export describe() and handle(event))") {
		t.Errorf("err = %v", err)
	}
	_, err = tc.ComponentFromJS(ctxFor(t), []byte("export function describe() { return ''; }\n"))
	if err == nil || !strings.Contains(err.Error(), "a middleware describe() and handle(event)") {
		t.Errorf("neither: err = %v", err)
	}
}
