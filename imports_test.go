package maiden_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

type leakOut struct {
	Got string `json:"got"`
}

// TestImportedMCPTools: an upstream MCP server (the Go SDK over streamable
// HTTP on loopback, behind a bearer token the host attaches from a secret)
// re-exposed as calc.TOOL: listed for the agent that binds the import,
// each call through its cards (argument-level), the upstream's schema
// (checked by maiden before anything is sent), middleware and the audit
// trail; a call the card denies never reaches the upstream.
func TestImportedMCPTools(t *testing.T) {
	var calls atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "adds two integers"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			calls.Add(1)
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "leak", Description: "echoes the credential it was sent"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, leakOut, error) {
			got := strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
			//lint:ignore SA1019 MCP logging is deprecated upstream (SEP-2577) but still how servers send logs, which maiden relays
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "the header was " + got})
			if in.A < 0 {
				return nil, leakOut{}, fmt.Errorf("refusing, my token is %s", got)
			}
			return nil, leakOut{Got: "I got " + got}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "sub", Description: "subtracts"},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			calls.Add(1)
			return nil, addOut{Sum: in.A - in.B}, nil
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var badAuth atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			badAuth.Add(1)
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close) // after the Host's cleanup (LIFO), which closes its upstream connection

	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[mcp.calc]
url = "`+hs.URL+`"
credential = "CALC_TOKEN"
middleware = [{ use = "validate", check = 'tool != "calc.add" || args.a != 13', message = "13 is unlucky" }]
[[middleware]]
use = "validate"
check = 'tool != "calc.add" || args.a < 1000'
message = "a is too big"
[agents.a]
tools = ["calc"]
grants = ["tool:invoke calc.add --a=* --b=2", "tool:invoke calc.leak --..."]
[agents.b]
tools = ["echo"]
grants = ["tool:invoke echo --..."]
`, maiden.Options{LookupSecret: func(name string) (string, bool) { return "s3cret", name == "CALC_TOKEN" }}, "echo")
	ctx := context.Background()
	infos, err := h.ToolsFor(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
	}
	if strings.Join(names, ",") != "calc.add,calc.leak,calc.sub" {
		t.Fatalf("agent a sees %v", names)
	}
	if infos, _ := h.ToolsFor(ctx, "b"); len(infos) != 1 || infos[0].Name != "echo" {
		t.Fatalf("agent b sees %+v", infos)
	}
	res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.add", Input: `{"a":40,"b":2}`})
	if !res.OK || !strings.Contains(res.Output, `"sum":42`) {
		t.Fatalf("calc.add: %+v %+v", res, res.Error)
	}
	var live []string
	res0 := mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.leak", Input: `{"a":1,"b":1}`, OnLog: func(e maiden.LogEntry) { live = append(live, e.Message) }})
	if strings.Contains(res0.Output, "s3cret") || !strings.Contains(res0.Output, "[REDACTED:CALC_TOKEN]") {
		t.Errorf("the upstream's echo of the credential: %+v", res0)
	}
	if l := fmt.Sprint(live, res0.Logs); strings.Contains(l, "s3cret") || !strings.Contains(l, "[REDACTED:CALC_TOKEN]") {
		t.Errorf("the upstream's log of the credential: live %q, result %+v", live, res0.Logs)
	}
	if res := mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.leak", Input: `{"a":-1,"b":1}`}); res.OK || strings.Contains(res.Error.Message, "s3cret") {
		t.Errorf("the upstream's error with the credential: %+v", res.Error)
	}
	before := calls.Load()
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.add", Input: `{"a":40,"b":3}`}), maiden.KindDenied, "no card")
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.sub", Input: `{"a":40,"b":2}`}), maiden.KindDenied, "no card")
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.add", Input: `{"a":"x","b":2}`}), maiden.KindInput, "")
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.add", Input: `{"a":5000,"b":2}`}), maiden.KindInput, "a is too big")
	wantKind(t, mustCall(t, h, maiden.Call{Agent: "a", Tool: "calc.add", Input: `{"a":13,"b":2}`}), maiden.KindInput, "13 is unlucky")
	if n := calls.Load() - before; n != 0 {
		t.Errorf("refused calls reached the upstream %d times", n)
	}
	if _, err := h.Call(ctx, maiden.Call{Agent: "b", Tool: "calc.add", Input: `{"a":1,"b":2}`}); err == nil {
		t.Error("an agent that does not bind the import called its tool")
	}
	if _, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "calc", Input: `{}`}); err == nil {
		t.Error("the import itself was callable as a tool")
	}
	if badAuth.Load() != 0 {
		t.Errorf("%d requests reached the upstream without the credential", badAuth.Load())
	}
	if adm := trail(t, h, "call-admitted"); len(adm) != 3 || adm[0].Tool != "calc.add" {
		t.Errorf("audit: %+v", adm)
	}
}

// TestImportedStdioServerConfined: a stdio MCP server (built from
// testdata/mcpstdio) imported with command = [...] runs under the wrapped
// CLIs' confinement: its tools answer, and it cannot read a file outside
// the import's read_paths.
func TestImportedStdioServerConfined(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mcpstdio")
	build := exec.Command("go", "build", "-o", bin, "./testdata/mcpstdio")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	inside, outside := t.TempDir(), t.TempDir()
	for _, d := range []string{inside, outside} {
		if err := os.WriteFile(filepath.Join(d, "f.txt"), []byte("in "+d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[mcp.local]
command = ["`+bin+`"]
read_paths = ["`+inside+`"]
`, maiden.Options{}, "echo")
	res := mustCall(t, h, maiden.Call{Tool: "local.add", Input: `{"a":1,"b":2}`})
	if !res.OK || !strings.Contains(res.Output, `"sum":3`) {
		t.Fatalf("local.add: %+v %+v", res, res.Error)
	}
	res = mustCall(t, h, maiden.Call{Tool: "local.read", Input: `{"path":"` + filepath.Join(inside, "f.txt") + `"}`})
	if !res.OK || !strings.Contains(res.Output, "in "+inside) {
		t.Fatalf("read inside: %+v %+v", res, res.Error)
	}
	res = mustCall(t, h, maiden.Call{Tool: "local.read", Input: `{"path":"` + filepath.Join(outside, "f.txt") + `"}`})
	if res.OK || !strings.Contains(res.Error.Message, "permission denied") {
		t.Fatalf("read outside read_paths: %+v %+v", res, res.Error)
	}
}
