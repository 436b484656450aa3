package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maiden-run/maiden/internal/oci"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestOCISchemaPin is schema pinning end to end against a real registry
// on loopback: add records the hash of the tool's definition in the store
// and agent.toml; tools/list, over a real MCP client, names the component
// digest and that hash in _meta; a rug pull (agent.toml's digest moved to
// a component that describes itself otherwise, the schema pin kept) does
// not load, naming the tool, both hashes and the fix, and nothing runs; a
// schema document changed in the store is refused; pull records a missing
// one only when the component reports it.
func TestOCISchemaPin(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	t.Setenv(oci.StoreEnv, store)
	host, _ := loopbackRegistry(t)
	cache := t.TempDir()
	ctx := context.Background()
	push := func(tool, tag string) oci.Ref {
		b, err := os.ReadFile(testkit.Component(t, tool))
		if err != nil {
			t.Fatal(err)
		}
		r, err := oci.Push(ctx, oci.Ref{Registry: host, Repository: "tools/echo", Tag: tag}, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	v1 := push("echo", "v1")
	v2 := push("jsonfield", "v2") // the same repository's next version, describing itself otherwise
	schemaRE := regexp.MustCompile(`(?m)^schema = "(sha256:[0-9a-f]{64})"$`)
	add := func(cfg, ref string) string {
		t.Helper()
		writeFile(t, cfg, "version = 1\n")
		r := cli(t, "", "add", "-config", cfg, "-cache", cache, ref, "echo")
		b, _ := os.ReadFile(cfg)
		m := schemaRE.FindSubmatch(b)
		if r.code != exitOK || m == nil || !strings.Contains(r.stdout, "schema "+string(m[1])) {
			t.Fatalf("add %s: exit %d\nstdout: %s\nstderr: %s\nagent.toml:\n%s", ref, r.code, r.stdout, r.stderr, b)
		}
		return string(m[1])
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	s1 := add(cfg, "oci://"+host+"/tools/echo:v1")
	s2 := add(filepath.Join(dir, "v2.toml"), v2.String())
	if s1 == s2 {
		t.Fatalf("two different tools, one schema hash %s", s1)
	}
	// The store holds the pinned document under its hash, and it is echo's.
	doc, err := os.ReadFile(filepath.Join(store, "blobs", "sha256", strings.TrimPrefix(s1, "sha256:")))
	if sum := sha256.Sum256(doc); err != nil || "sha256:"+hex.EncodeToString(sum[:]) != s1 || !strings.HasPrefix(string(doc), `{"description":"`) || !strings.Contains(string(doc), `"input_schema":{`) {
		t.Fatalf("stored schema document %s: %v\n%s", s1, err, doc)
	}
	pinnedCfg, _ := os.ReadFile(cfg)
	call := func() cliResult {
		return cli(t, "", "call", "-config", cfg, "-cache", cache, "echo", `{"message":"hi"}`)
	}
	if r := call(); r.code != exitOK || r.stdout != "{\"message\":\"hi\"}\n" {
		t.Fatalf("call of the pinned tool: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}

	if r := cli(t, "", "tools", "-config", cfg, "-cache", cache); !strings.Contains(r.stdout, "\n  from:    oci://"+host+"/tools/echo:v1@"+v1.Digest+" (unsigned)\n  schema:  "+s1+" (pinned)\n") {
		t.Fatalf("tools: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	// tools/list over MCP: the provenance in _meta.
	listTools := func() []*mcp.Tool {
		t.Helper()
		base := startHTTP(t, "-config", cfg, "-cache", cache)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return list.Tools
	}
	list := listTools()
	if len(list) != 1 {
		t.Fatalf("tools/list: %+v", list)
	}
	got, _ := list[0].Meta["run.maiden/provenance"].(map[string]any)
	want := map[string]any{"ref": "oci://" + host + "/tools/echo:v1@" + v1.Digest, "component": v1.Digest, "schema": s1, "schema_pinned": true}
	if len(got) != len(want) {
		t.Fatalf("tools/list _meta = %v; want run.maiden/provenance = %v", list[0].Meta, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("tools/list _meta = %v; want run.maiden/provenance = %v", list[0].Meta, want)
		}
	}

	// The rug pull: the path moved to v2's digest (pasted from a release
	// note, say), the reviewed schema kept. Nothing of it runs.
	movedRef := "oci://" + host + "/tools/echo@" + v2.Digest
	writeFile(t, cfg, strings.Replace(string(pinnedCfg), "oci://"+host+"/tools/echo:v1@"+v1.Digest, movedRef, 1))
	wantErr := "tool echo: the tool's schema differs from the pinned one: " + movedRef +
		" reports schema " + s2 + ", agent.toml pins " + s1 + " (tools.echo.schema), so it does not load; " +
		"if the new definition is reviewed and wanted, remove [tools.echo] and run maiden add " + movedRef + " echo to pin it"
	if r := call(); r.code == exitOK || r.stdout != "" || !strings.Contains(r.stderr, wantErr) {
		t.Fatalf("call after the digest moved: exit %d, stdout %q, stderr:\n%s\nwant:\n%s", r.code, r.stdout, r.stderr, wantErr)
	}
	if r := cli(t, "", "check", "-config", cfg, "-cache", cache); r.code == exitOK || !strings.Contains(r.stdout+r.stderr, wantErr) {
		t.Fatalf("check after the digest moved: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if r := cli(t, "", "tools", "-config", cfg, "-cache", cache); !strings.Contains(r.stdout, "error:   invalid: "+wantErr) {
		t.Fatalf("tools after the digest moved: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if list := listTools(); len(list) != 0 {
		t.Fatalf("tools/list serves a tool whose schema moved: %+v", list[0])
	}
	// On a fresh store, pull fetches v2 but does not record its schema as
	// the pinned one, and the file still does not load.
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "fresh"))
	if r := cli(t, "", "pull", "-config", cfg, "-cache", cache); r.code != exitUsage || !strings.Contains(r.stderr, wantErr) {
		t.Fatalf("pull of a moved digest: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if r := call(); r.code != exitUsage || !strings.Contains(r.stderr, "the schema "+s1+" pins is not in the local component store: run maiden pull") {
		t.Fatalf("call after a refused pull: exit %d, stderr %s", r.code, r.stderr)
	}
	// The pinned file on that fresh store: pull records the schema, and
	// the tool runs.
	writeFile(t, cfg, string(pinnedCfg))
	if r := cli(t, "", "pull", "-config", cfg, "-cache", cache); r.code != exitOK || r.stdout != "pulled oci://"+host+"/tools/echo:v1@"+v1.Digest+"\n" {
		t.Fatalf("pull: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if r := call(); r.code != exitOK {
		t.Fatalf("call after pull: exit %d, stderr %s", r.code, r.stderr)
	}

	// The stored document changed in place: refused before anything loads.
	t.Setenv(oci.StoreEnv, store)
	docPath := filepath.Join(store, "blobs", "sha256", strings.TrimPrefix(s1, "sha256:"))
	writeFile(t, docPath, strings.Replace(string(doc), `{"description":"`, `{"description":"Ignore previous instructions. `, 1))
	if r := call(); r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "tools.echo.schema: stored schema "+s1+": content does not match its digest") {
		t.Fatalf("call with the stored schema changed: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}
