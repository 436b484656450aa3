package toolbuild_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/toolbuild"
)

// TestJSCommandTemplate creates a js-command project (`maiden new
// js-command`), builds it as maiden build does, and calls it through a
// Host: tools/list serves the tree's projection, the handlers get the
// validated call (a default filled in), a call that does not fit is
// refused naming the argument, a card for one command denies the other,
// and help lists the commands.
func TestJSCommandTemplate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "wordy")
	p, files, err := toolbuild.NewProject(dir, toolbuild.TemplateCommandJS)
	if err != nil {
		t.Fatal(err)
	}
	if p.Lang != toolbuild.LangJS || !strings.Contains(strings.Join(files, " "), "index.js") {
		t.Fatalf("project %+v, files %v", p, files)
	}
	src, _ := os.ReadFile(filepath.Join(dir, "index.js"))
	if !strings.Contains(string(src), `name: "wordy"`) || strings.Contains(string(src), "{{.Name}}") {
		t.Fatalf("index.js does not name the tool:\n%s", src)
	}
	tc, err := toolbuild.EnsureToolchain(ctx, &toolbuild.Options{})
	if err != nil {
		t.Fatalf("EnsureToolchain: %v", err)
	}
	out := p.DefaultOutput()
	if err := tc.Build(ctx, p, out); err != nil {
		t.Fatal(err)
	}

	cfgPath := filepath.Join(t.TempDir(), "agent.toml")
	body := fmt.Sprintf(`version = 1
[tools.wordy]
path = %q
memory_mb = 128
[agents.counter]
tools = ["wordy"]
grants = ["tool:invoke wordy count --unit=* -- *"]
`, out)
	if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())

	infos, err := h.Tools(ctx)
	if err != nil || len(infos) != 1 || infos[0].Error != nil || !strings.Contains(infos[0].InputSchema, `"enum":["echo","count"]`) {
		t.Fatalf("tools: %+v %v", infos, err)
	}
	call := func(agent, in string) maiden.Result {
		t.Helper()
		res, err := h.Call(ctx, maiden.Call{Agent: agent, Tool: "wordy", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for in, want := range map[string]string{
		`{"command":"count","text":"one two  three"}`:       `{"unit":"words","count":3}`,
		`{"command":"count","unit":"chars","text":"héllo"}`: `{"unit":"chars","count":5}`,
	} {
		if res := call("counter", in); !res.OK || res.Output != want {
			t.Errorf("%s: %+v %+v, want %s", in, res, res.Error, want)
		}
	}
	for in, want := range map[string]maiden.ErrorKind{
		`{"command":"echo","text":"hi"}`:                maiden.KindDenied,
		`{"command":"count","unit":"lines","text":"x"}`: maiden.KindInput,
		`{"command":"count","text":"x","loud":true}`:    maiden.KindInput,
	} {
		if res := call("counter", in); res.OK || res.Error.Kind != want {
			t.Errorf("%s: %+v %+v, want kind %s", in, res, res.Error, want)
		}
	}
	// The implicit agent of a configuration without [agents] may echo.
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("version = 1\n[tools.wordy]\npath = %q\nmemory_mb = 128\n", out)), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err = config.Load(cfgPath); err != nil {
		t.Fatal(err)
	}
	h.SetConfig(cfg)
	if res := call("", `{"command":"echo","shout":true,"text":"-hi"}`); !res.OK || res.Output != `{"text":"-HI"}` {
		t.Errorf("echo: %+v %+v", res, res.Error)
	}
	help, err := h.CommandHelp(ctx, "wordy")
	if err != nil || !strings.Contains(help, "echo") || !strings.Contains(help, "count") {
		t.Errorf("help: %q %v", help, err)
	}
}
