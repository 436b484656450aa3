package maiden_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// writeConfig writes an agent.toml into a temp dir; %s placeholders in
// body are replaced by built test tool paths.
func writeConfig(t testing.TB, body string, tools ...string) *config.Config {
	t.Helper()
	args := make([]any, len(tools))
	for i, name := range tools {
		args[i] = testkit.Component(t, name)
	}
	path := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(body, args...)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newHost(t testing.TB, cfg *config.Config) *maiden.Host {
	t.Helper()
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

const kindsConfig = `version = 1
[tools.echo]
path = %q
[tools.toolerr]
path = %q
[tools.loop]
path = %q
timeout_ms = 200
[tools.memgrow]
path = %q
memory_mb = 8
[tools.trap]
path = %q
[tools.notwasm]
path = %q
`

func TestCallKinds(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, kindsConfig, "echo", "toolerr", "loop", "memgrow", "trap", "notwasm")
	h := newHost(t, cfg)
	tests := []struct {
		tool string
		ok   bool
		kind maiden.ErrorKind
	}{
		{"echo", true, ""},
		{"toolerr", false, maiden.KindTool},
		{"loop", false, maiden.KindDeadline},
		{"memgrow", false, maiden.KindMemory},
		{"trap", false, maiden.KindTrap},
		{"notwasm", false, maiden.KindInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			res, err := h.Call(context.Background(), maiden.Call{Tool: tc.tool, Input: `{"message":"hi"}`})
			if err != nil {
				t.Fatalf("host error: %v", err)
			}
			if res.OK != tc.ok || res.Tool != tc.tool {
				t.Fatalf("got %+v", res)
			}
			if tc.ok {
				if res.Output != `{"message":"hi"}` || res.Error != nil {
					t.Errorf("got %+v", res)
				}
				return
			}
			if res.Error == nil || res.Error.Kind != tc.kind || res.Error.Message == "" {
				t.Errorf("error %+v, want kind %s", res.Error, tc.kind)
			}
		})
	}
}

func TestCallRefusals(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "version = 1\n[tools.echo]\npath = %q\n", "echo")
	h := newHost(t, cfg)
	ctx := context.Background()
	if _, err := h.Call(ctx, maiden.Call{Tool: "nope", Input: "{}"}); !errors.Is(err, maiden.ErrUnknownTool) || !strings.Contains(err.Error(), "tools: echo") {
		t.Errorf("unknown tool: %v", err)
	}
	for _, in := range []string{"", "{", "not json", `{"a":1}x`} {
		res, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: in})
		if err != nil || res.OK || res.Error.Kind != maiden.KindInput {
			t.Errorf("input %q: %+v, %v", in, res.Error, err)
		}
	}
	h.Close(context.Background())
	if _, err := h.Call(ctx, maiden.Call{Tool: "echo", Input: "{}"}); !errors.Is(err, maiden.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestCallCancelled(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "version = 1\n[tools.loop]\npath = %q\ntimeout_ms = 60000\n", "loop")
	h := newHost(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Call(ctx, maiden.Call{Tool: "loop", Input: "{}"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// TestPolicyIsReadPerCall: a new configuration applies to the next call.
func TestPolicyIsReadPerCall(t *testing.T) {
	t.Parallel()
	loop := testkit.Component(t, "loop")
	h := newHost(t, writeConfig(t, "version = 1\n[tools.loop]\npath = %q\ntimeout_ms = 100\n", "loop"))
	res, err := h.Call(context.Background(), maiden.Call{Tool: "loop", Input: "{}"})
	if err != nil || res.Error == nil || !strings.Contains(res.Error.Message, "100ms") {
		t.Fatalf("first call: %+v %v", res.Error, err)
	}
	next, err := config.Parse("agent.toml", []byte(fmt.Sprintf("version = 1\n[tools.loop]\npath = %q\ntimeout_ms = 300\n", loop)), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h.SetConfig(next)
	res, err = h.Call(context.Background(), maiden.Call{Tool: "loop", Input: "{}"})
	if err != nil || res.Error == nil || !strings.Contains(res.Error.Message, "300ms") {
		t.Fatalf("after SetConfig: %+v %v", res.Error, err)
	}
}

func TestResultJSON(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "version = 1\n[tools.toolerr]\npath = %q\n", "toolerr")
	h := newHost(t, cfg)
	res, err := h.Call(context.Background(), maiden.Call{Tool: "toolerr", Input: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["duration_ms"].(float64); !ok {
		t.Errorf("no duration_ms in %s", b)
	}
	delete(got, "duration_ms")
	want := map[string]any{
		"tool":  "toolerr",
		"ok":    false,
		"error": map[string]any{"kind": "tool", "message": "the tool refused: bad input"},
		"logs":  []any{},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("envelope (-want +got):\n%s", diff)
	}
}

func TestToolsAndCheck(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `version = 1
[tools.echo]
path = %q
http_allow = ["api.example.com"]
secrets = ["API_TOKEN"]
[tools.broken]
path = %q
`, "echo", "badimport")
	h := newHost(t, cfg)
	infos, err := h.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Name != "broken" || infos[1].Name != "echo" {
		t.Fatalf("got %+v", infos)
	}
	if infos[0].Error == nil || infos[0].Error.Kind != maiden.KindInvalid || !strings.Contains(infos[0].Error.Message, "evil:net/socket") {
		t.Errorf("broken tool: %+v", infos[0].Error)
	}
	echo := infos[1]
	if echo.Error != nil || !strings.Contains(echo.Description, "Echoes") || !strings.Contains(echo.InputSchema, "message") {
		t.Errorf("echo: %+v", echo)
	}
	if diff := cmp.Diff(maiden.Policy{Path: echo.Policy.Path, TimeoutMS: 5000, MemoryMB: 64, HTTPAllow: []string{"api.example.com"},
		HTTPPorts: []uint16{}, HTTPAllowCIDRs: []string{}, HTTPCAFiles: []string{}, HTTPMaxResponseBytes: 2 << 20, Secrets: []string{"API_TOKEN"}}, echo.Policy); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
	reports, err := h.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 2 || reports[0].Err == nil || reports[1].Err != nil {
		t.Errorf("check: %+v", reports)
	}
}

func TestSchemaValidation(t *testing.T) {
	t.Parallel()
	h := newHost(t, writeConfig(t, "version = 1\n[tools.echo]\npath = %q\n", "echo"))
	res, err := h.Call(context.Background(), maiden.Call{Tool: "echo", Input: `{"message":7,"extra":true}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error.Kind != maiden.KindInput || !strings.Contains(res.Error.Message, "at /message") {
		t.Fatalf("got %+v", res.Error)
	}
	if len(res.Logs) != 0 {
		t.Errorf("the tool ran: %+v", res.Logs)
	}
}

// TestUnusableSchemas: a tool whose schema is not a JSON Schema for an
// object is not served, and a $ref to a host file is not followed.
func TestUnusableSchemas(t *testing.T) {
	t.Parallel()
	// A valid schema where the tool points: following the $ref would make
	// refschema look fine.
	target := "/tmp/maiden-refschema-target.json"
	if err := os.WriteFile(target, []byte(`{"type":"string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(target) })
	h := newHost(t, writeConfig(t, "version = 1\n[tools.badschema]\npath = %q\n[tools.refschema]\npath = %q\n", "badschema", "refschema"))
	for tool, want := range map[string]string{
		"badschema": `must have "type": "object"`,
		"refschema": "maiden resolves only references inside the schema itself",
	} {
		res, err := h.Call(context.Background(), maiden.Call{Tool: tool, Input: `{"a":"x"}`})
		if err != nil {
			t.Fatal(err)
		}
		if res.OK || res.Error.Kind != maiden.KindInvalid || !strings.Contains(res.Error.Message, want) {
			t.Errorf("%s: got %+v, want invalid mentioning %q", tool, res.Error, want)
		}
	}
	infos, err := h.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range infos {
		if i.Error == nil || i.Error.Kind != maiden.KindInvalid {
			t.Errorf("tools lists %s as %+v", i.Name, i.Error)
		}
	}
}

func TestStartupLoopIsADeadline(t *testing.T) {
	t.Parallel()
	h := newHost(t, writeConfig(t, "version = 1\n[tools.startloop]\npath = %q\ntimeout_ms = 200\n", "startloop"))
	res, err := h.Call(context.Background(), maiden.Call{Tool: "startloop", Input: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error.Kind != maiden.KindDeadline {
		t.Fatalf("got %+v", res.Error)
	}
}

// TestOverload: beyond MaxConcurrent running and MaxQueued waiting, a call
// is refused at once instead of waiting without bound.
func TestOverload(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "version = 1\n[tools.loop]\npath = %q\ntimeout_ms = 1500\n", "loop")
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: t.TempDir(), MaxConcurrent: 1, MaxQueued: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Call(context.Background(), maiden.Call{Tool: "loop", Input: "{}"})
	}()
	// Admission is the first thing a call does; give the background call
	// time to take the only slot, then probe. A probe that wins the slot
	// anyway (a slow scheduler) gives up after 20ms and the next one tries.
	time.Sleep(100 * time.Millisecond)
	deadline := time.Now().Add(1200 * time.Millisecond)
	var got error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, got = h.Call(ctx, maiden.Call{Tool: "loop", Input: "{}"})
		cancel()
		if errors.Is(got, maiden.ErrOverloaded) {
			break
		}
	}
	if !errors.Is(got, maiden.ErrOverloaded) || !strings.Contains(got.Error(), "1 calls running") {
		t.Fatalf("got %v, want ErrOverloaded", got)
	}
	<-done
}

// TestCheckWarnings: Check names what will certainly fail or do nothing at
// call time although the tool loads, each with the key that changes it; a
// clean policy has none.
func TestCheckWarnings(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.net]
path = %[1]q
http_allow = ["api.example.com", "127.0.0.1", "10.1.2.3", "localhost", "[fd00::1]"]
http_allow_cidrs = ["10.0.0.0/8"]
secrets = ["HAS_VALUE", "EMPTY", "ABSENT"]
[tools.offline]
path = %[1]q
secrets = ["HAS_VALUE"]
http_ports = [8443]
[tools.clean]
path = %[1]q
http_allow = ["api.example.com"]
secrets = ["HAS_VALUE"]
`, maiden.Options{Isolation: maiden.InProcess, LookupSecret: func(name string) (string, bool) {
		switch name {
		case "HAS_VALUE":
			return "v", true
		case "EMPTY":
			return "", true
		}
		return "", false
	}}, "echo")
	reports, err := h.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"clean": nil,
		"net": {
			"tools.net.secrets: MAIDEN_SECRET_EMPTY is not set here",
			"tools.net.secrets: MAIDEN_SECRET_ABSENT is not set here",
			"tools.net.http_allow: 127.0.0.1 will always be refused: address 127.0.0.1 is loopback",
			"tools.net.http_allow: localhost will always be refused",
			"tools.net.http_allow: fd00::1 will always be refused",
		},
		"offline": {
			"tools.offline.secrets has no effect: the tool has no http_allow",
			"tools.offline.http_ports has no effect",
		},
	}
	for _, r := range reports {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Tool, r.Err)
		}
		w := want[r.Tool]
		if len(r.Warnings) != len(w) {
			t.Errorf("%s: %d warnings, want %d:\n%s", r.Tool, len(r.Warnings), len(w), strings.Join(r.Warnings, "\n"))
			continue
		}
		for i := range w {
			if !strings.HasPrefix(r.Warnings[i], w[i]) {
				t.Errorf("%s: warning %d is %q, want it to start %q", r.Tool, i, r.Warnings[i], w[i])
			}
		}
	}
}

// TestToolsShowSecretDestinations: the policy Tools reports includes where
// each bound secret may go, so `maiden tools` shows the whole policy.
func TestToolsShowSecretDestinations(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, `version = 1
[tools.net]
path = %q
http_allow = ["api.example.com", "other.example.com"]
secrets = ["BOUND", "FREE"]

[secrets.BOUND]
hosts = ["api.example.com"]
methods = ["GET"]
path_prefixes = ["/v1/"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	infos, err := h.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := infos[0].Policy.SecretDestinations
	if len(d) != 1 || strings.Join(d["BOUND"].Hosts, ",") != "api.example.com" || strings.Join(d["BOUND"].Methods, ",") != "GET" || strings.Join(d["BOUND"].PathPrefixes, ",") != "/v1/" {
		t.Errorf("secret destinations %+v", d)
	}
}
