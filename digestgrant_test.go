package maiden_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/oci"
	"github.com/maiden-run/maiden/internal/testkit"
)

// fileDigest is "sha256:" and the SHA-256 of the file at path: a local
// component's digest as a grant names it.
func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// replaceFile puts the bytes of src at dst as a rebuild does: written
// beside it, then renamed over it.
func replaceFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// TestGrantNamingADigest (issue 25): agent a's only grant for echo names
// echo's component. The call runs while echo's file is that component; a
// rebuilt file (another component at the same path) and a path changed in
// agent.toml are both refused as denied, the reason naming both digests
// and the fix the grant pinned to the component that runs now; nothing
// of the other component ran. Each call's record carries the component
// its cards were asked about, and the what-if replays it: a grant naming
// another digest flips nothing, the pinned fix flips exactly the refused
// calls.
func TestGrantNamingADigest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	echoSrc, loggerSrc := testkit.Component(t, "echo"), testkit.Component(t, "logger")
	dEcho, dLogger := fileDigest(t, echoSrc), fileDigest(t, loggerSrc)
	if dEcho == dLogger {
		t.Fatal("the two fixtures are the same component")
	}
	tool := filepath.Join(dir, "echo.wasm")
	replaceFile(t, echoSrc, tool)
	cfgPath := filepath.Join(dir, "agent.toml")
	load := func(path string) *config.Config {
		t.Helper()
		body := fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n[agents.a]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo@%s --message=*\"]\n", path, dEcho)
		if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	h, err := maiden.New(load(tool), &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	call := func(msg string) maiden.Result {
		t.Helper()
		return mustCall(t, h, maiden.Call{Agent: "a", Tool: "echo", Input: `{"message":"` + msg + `"}`})
	}
	wantRan := func(msg string) {
		t.Helper()
		if res := call(msg); !res.OK || res.Output != `{"message":"`+msg+`"}` {
			t.Fatalf("the call of echo's own component: %+v %+v", res, res.Error)
		}
	}
	wantRefused := func(msg string) {
		t.Helper()
		res := call(msg)
		fix := "maiden cards grant -agent a 'tool:invoke echo@" + dLogger + " --message=" + msg + "'"
		if res.OK || res.Error == nil || res.Error.Kind != maiden.KindDenied {
			t.Fatalf("the call of another component under the name echo: %+v %+v, want denied", res, res.Error)
		}
		m := res.Error.Message
		if !strings.Contains(m, "the tool's component is "+dLogger+", not "+dEcho) || !strings.Contains(m, fix) {
			t.Fatalf("the denial does not name both digests and the pinned fix %q:\n%s", fix, m)
		}
		if len(res.Logs) != 0 {
			t.Fatalf("the other component ran: its logs %+v", res.Logs)
		}
	}

	wantRan("one")
	// The file is rebuilt into another component (logger's bytes).
	replaceFile(t, loggerSrc, tool)
	wantRefused("two")
	// Back to the granted component: allowed again.
	replaceFile(t, echoSrc, tool)
	wantRan("three")
	// agent.toml points echo at another file.
	h.SetConfig(load(loggerSrc))
	wantRefused("four")

	// The records name the component the cards were asked about.
	type body struct {
		Rendered string
		Decision api.Decision
	}
	var got []string
	for _, r := range trail(t, h, "") {
		if r.Kind != "call-admitted" && r.Kind != "call-refused" {
			continue
		}
		var b body
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %s %v", r.Kind, b.Rendered, b.Decision.Component, b.Decision.Allow))
	}
	want := []string{
		"call-admitted --message=one " + dEcho + " true",
		"call-refused --message=two " + dLogger + " false",
		"call-admitted --message=three " + dEcho + " true",
		"call-refused --message=four " + dLogger + " false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the calls' records (-want +got):\n%s", diff)
	}

	// The what-if replays each call with its component.
	adm, err := admin.Open(ctx, h.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	since := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name, grant string
		flips       int
		targets     []string
	}{
		{"another digest", "tool:invoke echo@sha256:" + strings.Repeat("0", 64) + " --message=*", 0, nil},
		{"echo's own digest again", "tool:invoke echo@" + dEcho + " --...", 0, nil},
		{"the pinned fix's digest", "tool:invoke echo@" + dLogger + " --message=*", 2, []string{"tool:invoke echo --message=two", "tool:invoke echo --message=four"}},
	} {
		rep, err := adm.WhatIf(ctx, api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "a", Grant: tc.grant}}}, since)
		if err != nil {
			t.Fatal(err)
		}
		var targets []string
		for _, g := range rep.Groups {
			for _, ex := range g.Examples {
				targets = append(targets, ex.Target)
			}
		}
		if rep.Flips != tc.flips || !cmp.Equal(targets, tc.targets) || len(rep.Inexact) != 0 || rep.Verified != 4 {
			t.Errorf("%s: %d flips %q, %d verified, inexact %v; want %d flips %q, all 4 verified", tc.name, rep.Flips, targets, rep.Verified, rep.Inexact, tc.flips, tc.targets)
		}
	}
}

// TestGrantNamingAnOCIDigest (issue 25): an oci:// tool's component is
// its pinned manifest digest, the one agent.toml, maiden add and the
// audit record's component name: a grant naming it allows the call, and a
// grant naming the component file's own SHA-256 (the layer's digest) does
// not, its denial naming both.
func TestGrantNamingAnOCIDigest(t *testing.T) {
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "store"))
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ctx := context.Background()
	src := testkit.Component(t, "echo")
	wasm, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := oci.Push(ctx, oci.Ref{Registry: strings.TrimPrefix(srv.URL, "http://"), Repository: "tools/echo", Tag: "v1"}, wasm, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := oci.OpenStore(os.Getenv(oci.StoreEnv))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oci.Pull(ctx, pinned, st, nil); err != nil {
		t.Fatal(err)
	}
	layer := fileDigest(t, src)
	if layer == pinned.Digest {
		t.Fatal("the manifest digest is the layer's")
	}
	h := newHostWith(t, `version = 1
[tools.echo]
path = "`+pinned.String()+`"
[agents.manifest]
tools = ["echo"]
grants = ["tool:invoke echo@`+pinned.Digest+` --..."]
[agents.layer]
tools = ["echo"]
grants = ["tool:invoke echo@`+layer+` --..."]
[state]
path = "`+filepath.Join(t.TempDir(), "state.db")+`"
`, maiden.Options{Isolation: maiden.InProcess})
	if res := mustCall(t, h, maiden.Call{Agent: "manifest", Tool: "echo", Input: `{"message":"hi"}`}); !res.OK {
		t.Fatalf("a grant naming the manifest digest: %+v %+v", res, res.Error)
	}
	res := mustCall(t, h, maiden.Call{Agent: "layer", Tool: "echo", Input: `{"message":"hi"}`})
	if res.OK || res.Error == nil || res.Error.Kind != maiden.KindDenied || !strings.Contains(res.Error.Message, "the tool's component is "+pinned.Digest+", not "+layer) {
		t.Fatalf("a grant naming the layer's digest: %+v %+v, want denied naming both", res, res.Error)
	}
}
