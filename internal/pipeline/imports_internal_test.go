package pipeline

import (
	"context"
	"errors"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/mcphub"
	"github.com/maiden-run/maiden/internal/sandbox"
)

// TestRetiredImportNotRestarted: a call that began on the configuration
// before a reload removed its [mcp.NAME] import (it holds the old table)
// does not start the server again: the reload would have nothing left to
// stop, and the process would run until Close.
func TestRetiredImportNotRestarted(t *testing.T) {
	dir := t.TempDir()
	h, cfg := testHost(t, dir, "version = 1\n[mcp.local]\ncommand = [\"/bin/true\"]\n", &Options{Isolation: api.InProcess, CacheDir: "off"})
	defer h.Close(context.Background())
	old, ok := cfg.Tool("local")
	if !ok || old.MCP == nil {
		t.Fatalf("no [mcp.local] in %+v", cfg.Tools())
	}
	h.SetConfig(testConfig(t, dir, "version = 1\n"))
	if _, err := h.imports.upstream(context.Background(), "local", old.MCP); !errors.Is(err, errRetired) {
		t.Errorf("the removed import's old table: %v, want errRetired", err)
	}
	n := h.hub().Running()
	if n != 0 {
		t.Errorf("%d upstreams after the removed import was asked for", n)
	}
	imp, ok := h.kindsOf(cfg).of("local").(*importBackend)
	if !ok {
		t.Fatalf("local's backend is %T, want the import's", h.kindsOf(cfg).of("local"))
	}
	infos, _, err := imp.tools(context.Background(), old)
	if err != nil || len(infos) != 0 {
		t.Errorf("listing the removed import on the old configuration: %v %+v, want nothing", err, infos)
	}
}

// TestImportLimitsAreEveryTools: an imported tool's log budget and output
// limit (internal/mcphub's, which cannot import internal/sandbox) are a
// WebAssembly tool's defaults, as their docs say.
func TestImportLimitsAreEveryTools(t *testing.T) {
	if mcphub.MaxLogBytes != sandbox.DefaultMaxLogBytes || mcphub.MaxOutputBytes != sandbox.DefaultMaxOutputBytes {
		t.Errorf("imports keep %d bytes of log and %d of output; WebAssembly tools %d and %d",
			mcphub.MaxLogBytes, mcphub.MaxOutputBytes, sandbox.DefaultMaxLogBytes, sandbox.DefaultMaxOutputBytes)
	}
}
