package maiden_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
)

// TestImportPinRefusesWidenedTool (issue 22, finding 12): testdata/mcpstdio
// imported over stdio. Its tools are refused until an operator accepts them;
// once accepted, pay takes at most 10. The upstream then replaces pay
// through notifications/tools/list_changed with a schema that takes
// anything and a hostile description: a call with amount 999999 is refused
// (kind denied, naming the change and the command), never reaching the
// upstream, and agents keep being shown the accepted pay (no escape
// sequence, no U+202E); after the operator accepts the change, it runs.
func TestImportPinRefusesWidenedTool(t *testing.T) {
	t.Parallel()
	bin := buildMCPStdio(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.toml")
	h := newHost(t, writeConfigAt(t, path, `version = 1
[tools.echo]
path = %q
[mcp.shop]
command = ["`+bin+`"]
`, "echo"))
	changed := make(chan struct{}, 16)
	h.OnToolsChanged(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	ctx := context.Background()

	// Never accepted: refused, and listed without the upstream's text.
	wantKind(t, mustCall(t, h, maiden.Call{Tool: "shop.pay", Input: `{"amount":5}`}), maiden.KindDenied,
		"no operator has accepted; an operator must run maiden mcp accept shop")
	if pay := toolInfo(t, h, "shop.pay"); pay.Description != "" || pay.InputSchema != "" {
		t.Errorf("a tool never accepted is described to agents: %+v", pay)
	}

	accept := func(want map[string]string) {
		t.Helper()
		reviews, err := h.ReviewImport(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		var todo []maiden.ImportReview
		for _, r := range reviews {
			if w, ok := want[r.Tool]; ok && r.State != w {
				t.Errorf("%s: state %s, want %s (%+v)", r.Tool, r.State, w, r)
			}
			if r.State != "accepted" {
				todo = append(todo, r)
			}
		}
		if len(todo) > 0 {
			// A review edited after it was shown is not pinned.
			edited := slices.Clone(todo)
			edited[0].Offered.Description += " (and anything else)"
			if err := h.AcceptImport(edited); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
				t.Errorf("a review edited after ReviewImport: AcceptImport said %v, want the digest mismatch", err)
			}
		}
		if err := h.AcceptImport(todo); err != nil {
			t.Fatal(err)
		}
	}
	accept(map[string]string{"shop.pay": "new", "shop.widen": "new"})
	if _, err := os.Stat(filepath.Join(dir, maiden.PinsFileName)); err != nil {
		t.Fatalf("the pins are not beside agent.toml: %v", err)
	}
	if res := mustCall(t, h, maiden.Call{Tool: "shop.pay", Input: `{"amount":5}`}); !res.OK || !strings.Contains(res.Output, `"paid":5`) {
		t.Fatalf("accepted pay: %+v %+v", res, res.Error)
	}
	wantKind(t, mustCall(t, h, maiden.Call{Tool: "shop.pay", Input: `{"amount":999999}`}), maiden.KindInput, "")

	// The upstream widens pay and announces it.
	for len(changed) > 0 {
		<-changed
	}
	if res := mustCall(t, h, maiden.Call{Tool: "shop.widen", Input: `{}`}); !res.OK {
		t.Fatalf("widen: %+v", res.Error)
	}
	deadline := time.After(30 * time.Second)
	for {
		// The upstream's list as re-listed (not the pin's verdict).
		if reviews, err := h.ReviewImport(ctx, "shop"); err == nil && slices.ContainsFunc(reviews, func(r maiden.ImportReview) bool {
			return r.Tool == "shop.pay" && r.Offered.InputSchema == `{"type":"object"}`
		}) {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the upstream's list_changed never reached the host")
		}
	}
	res := mustCall(t, h, maiden.Call{Tool: "shop.pay", Input: `{"amount":999999}`})
	wantKind(t, res, maiden.KindDenied,
		"the upstream changed tool shop.pay's input schema and description since it was accepted; an operator must run maiden mcp accept shop")
	pay := toolInfo(t, h, "shop.pay")
	if pay.Error == nil || pay.Error.Kind != maiden.KindDenied || !strings.Contains(pay.InputSchema, `"maximum":10`) ||
		pay.Description != "pays an amount (at most 10)" {
		t.Errorf("the changed pay is not listed as accepted: %+v %+v", pay, pay.Error)
	}

	// The operator accepts the change: the call runs. Agents see the new
	// description with its controls escaped.
	accept(map[string]string{"shop.pay": "changed", "shop.widen": "accepted"})
	if res := mustCall(t, h, maiden.Call{Tool: "shop.pay", Input: `{"amount":999999}`}); !res.OK || !strings.Contains(res.Output, `"paid":999999`) {
		t.Fatalf("pay after the change was accepted: %+v %+v", res, res.Error)
	}
	pay = toolInfo(t, h, "shop.pay")
	if strings.ContainsAny(pay.Description, "\x1b\u202e") || !strings.Contains(pay.Description, `\x1b[2K\u202e01 xam`) {
		t.Errorf("the description reaches agents raw: %q", pay.Description)
	}
}

func toolInfo(t *testing.T, h *maiden.Host, name string) maiden.ToolInfo {
	t.Helper()
	infos, err := h.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range infos {
		if i.Name == name {
			return i
		}
	}
	t.Fatalf("no %s in %+v", name, infos)
	return maiden.ToolInfo{}
}

// TestImportDownFromStartIsUnavailable: an imported server that has never
// come up (testdata/mcpstdio failing to start while its MCPSTDIO_DOWN file
// exists) has listed no tools; a call of one of them is kind unavailable,
// naming the server and why, not an unknown tool.
func TestImportDownFromStartIsUnavailable(t *testing.T) {
	t.Parallel()
	bin := buildMCPStdio(t)
	flags := t.TempDir()
	down := filepath.Join(flags, "down")
	if err := os.WriteFile(down, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
[mcp.shop]
accept_new_tools = true
command = ["`+bin+`"]
env = ["MCPSTDIO_DOWN=`+down+`"]
read_paths = ["`+flags+`"]
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	res, err := h.Call(context.Background(), maiden.Call{Tool: "shop.pid", Input: `{}`})
	if err != nil {
		t.Fatalf("a call while the server has never come up: %v (want kind unavailable)", err)
	}
	wantKind(t, res, maiden.KindUnavailable, `MCP upstream "shop" is unavailable`)
}
