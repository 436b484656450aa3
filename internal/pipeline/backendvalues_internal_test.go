package pipeline

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestBackendsHoldNoHost: a backend is a value holding what it needs of
// the Host, never the Host (issue 21, end state 5), as the stages are
// (TestStagesHoldNoHost). Every backend value newBackends builds, as the kinds of a
// configuration with every kind (a WebAssembly tool, a wrapped CLI, an MCP
// import, the built-ins) is walked as it is, field by field, through
// pointers, slices, maps and the values behind interfaces (the runner, the
// egress gate's token store): none may reach a Host. A function value is
// not looked into; what it is given as is read in newBackends (and TestNoHostMethodValues
// holds that it is no method value of the Host).
func TestBackendsHoldNoHost(t *testing.T) {
	dir := t.TempDir()
	root := testkit.RepoRoot(t)
	h, cfg := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.echo]
path = %q
[clis.git]
path = "/usr/bin/git"
command_file = %q
[mcp.calc]
url = "http://127.0.0.1:1/mcp"
[agents.a]
tools = ["echo", "git", "calc", "cards_revoke", "fs_read", "web_fetch"]
`, testkit.Component(t, "echo"), filepath.Join(root, "examples/git/git.command.json")), &Options{Isolation: api.InProcess, CacheDir: "off"})
	defer h.Close(t.Context())
	k := h.newBackends().kinds(cfg)
	all := map[string]backend{"(unknown)": k.unknown}
	for name, b := range k.byName {
		all[name] = b
	}
	for name, b := range k.imports {
		all["mcp."+name] = b
	}
	host := reflect.TypeOf(Host{})
	kinds := map[string]bool{}
	seen := map[visit]bool{} // the backends share their dependencies: each is walked once
	for name, b := range all {
		kinds[toolKind(b)] = true
		v := reflect.ValueOf(b)
		if path, ok := valueReaches(v, host, seen); ok {
			t.Errorf("the backend of %s (%T) holds the Host: %s", name, b, path)
		}
	}
	for _, kind := range []string{"wasm", "cli", "mcp", "builtin"} {
		if !kinds[kind] {
			t.Errorf("newBackends built no %s backend: the walk would prove nothing of it (kinds: %v)", kind, kinds)
		}
	}
}

// visit is a value already walked: its address and type.
type visit struct {
	ptr uintptr
	typ reflect.Type
}

// valueReaches reports whether value v holds a value of type want, and by
// which fields; seen are the pointers and maps already walked.
func valueReaches(v reflect.Value, want reflect.Type, seen map[visit]bool) (string, bool) {
	if !v.IsValid() {
		return "", false
	}
	t := v.Type()
	if t == want {
		return t.String(), true
	}
	if strings.Contains(t.String(), "_Ctype") {
		return "", false // cgo memory (the wasmtime engine): no Go value behind it
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Map:
		if v.IsNil() {
			return "", false
		}
		key := visit{v.Pointer(), t}
		if seen[key] {
			return "", false
		}
		seen[key] = true
		if v.Kind() == reflect.Pointer {
			if t.Elem() == want {
				return t.String(), true
			}
			return valueReaches(v.Elem(), want, seen)
		}
		it := v.MapRange()
		for it.Next() {
			if p, ok := valueReaches(it.Key(), want, seen); ok {
				return "[key] → " + p, true
			}
			if p, ok := valueReaches(it.Value(), want, seen); ok {
				return fmt.Sprintf("[%v] → %s", it.Key(), p), true
			}
		}
	case reflect.Interface:
		if v.IsNil() {
			return "", false
		}
		return valueReaches(v.Elem(), want, seen)
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if p, ok := valueReaches(v.Index(i), want, seen); ok {
				return fmt.Sprintf("[%d] → %s", i, p), true
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if p, ok := valueReaches(v.Field(i), want, seen); ok {
				return t.Name() + "." + t.Field(i).Name + " → " + p, true
			}
		}
	}
	return "", false
}

// TestCommandRefusalNamesComponent: a command-tree WebAssembly tool's call
// whose input does not fit its command description is refused (kind input)
// by the backend's parse, before the cards; the version parse opened is
// still the call's, so the call-refused record names its component, as it
// did when parse wrote the invocation itself.
func TestCommandRefusalNamesComponent(t *testing.T) {
	dir := t.TempDir()
	comp := testkit.Component(t, "cmdecho")
	h, _ := testHost(t, dir, fmt.Sprintf(`version = 1
[tools.cmdecho]
path = %q
[agents.a]
tools = ["cmdecho"]
grants = ["tool:invoke cmdecho list"]
[state]
path = %q
`, comp, filepath.Join(dir, "state.db")), &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(t.Context())
	res, err := h.Call(t.Context(), Call{Agent: "a", Tool: "cmdecho", Input: `{"command":"nope"}`})
	if err != nil || res.Error == nil || res.Error.Kind != KindInput {
		t.Fatalf("a call of no described command: %+v %v, want kind input", res.Error, err)
	}
	st, _, err := h.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Journal().Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs, err := st.AuditTail(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(comp)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("sha256:%x", sha256.Sum256(b))
	for _, r := range recs {
		if r.Kind != store.AuditCallRefused {
			continue
		}
		var body struct {
			Component string `json:"component"`
			Kind      string `json:"kind"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Component != want || body.Kind != string(KindInput) {
			t.Fatalf("the call-refused record: %s; want component %s, kind input", r.Body, want)
		}
		return
	}
	t.Fatalf("no call-refused record among %d", len(recs))
}

// useRunner makes r the Host's runner, for a test that wraps it after New:
// the backends are built again, since they hold the runner they were given
// (newBackends), not the Host.
func (h *Host) useRunner(r sandbox.Runner) {
	h.runner = r
	h.kinds.backends = h.newBackends()
	h.kinds.set(h.cfg.Load())
}
