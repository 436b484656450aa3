package toolbuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMiddlewareTemplatesProject creates each middleware template with
// NewProject: the middleware contract and not the tool's, a README that
// shows the verdicts and the agent.toml table. Building and running each
// template (its world, its verdicts through the real call path) is
// cmd/maiden's TestNewMiddlewareBuildCall, as an operator does it: the
// same builds here cost make test two more componentize-js runs.
func TestMiddlewareTemplatesProject(t *testing.T) {
	t.Parallel()
	for _, tmpl := range MiddlewareTemplates {
		t.Run(string(tmpl), func(t *testing.T) {
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
		})
	}
}

// TestMiddlewareGoTemplateOnHost runs go vet and go test in a new Go
// middleware project with the module proxy off, like TestGoTemplateOnHost.
func TestMiddlewareGoTemplateOnHost(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
