package maiden_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/oci"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestOCIProvenanceInTheAuditTrail: a call of a signed oci:// tool is
// recorded with the component's manifest digest and the key that signed
// it (the chain signature → digest → audit record); a call of a local
// tool, plain or a command tree, with the SHA-256 of its file, marked
// local, and no signer. Each names the hash of the definition its
// component reported: for the oci:// tool the one tools/list's
// provenance shows.
func TestOCIProvenanceInTheAuditTrail(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	t.Setenv(oci.StoreEnv, store)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	wasm, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	privPEM, _ := cryptoutils.MarshalPrivateKeyToPEM(priv)
	pubPEM, _ := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	signer, err := oci.ParseSigner(privPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := oci.ParseKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := oci.Push(ctx, oci.Ref{Registry: host, Repository: "tools/echo", Tag: "v1"}, wasm, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := oci.Sign(ctx, pinned, signer, nil); err != nil {
		t.Fatal(err)
	}
	st, err := oci.OpenStore(store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oci.Pull(ctx, pinned, st, &oci.PullOptions{Key: key}); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(pub, pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHostWith(t, `version = 1
[tools.signed]
path = "`+pinned.String()+`"
verify = { key = "`+pub+`" }
[tools.echo]
path = %q
[tools.cmdecho]
path = %q
[agents.a]
tools = ["signed", "echo", "cmdecho"]
grants = ["tool:invoke signed --...", "tool:invoke echo --...", "tool:invoke cmdecho list"]
[state]
path = "`+filepath.Join(t.TempDir(), "state.db")+`"
`, maiden.Options{Isolation: maiden.InProcess}, "echo", "cmdecho")
	infos, err := h.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The hash of each tool's definition as tools/list serves it, computed
	// here from what it serves (the oci:// tool's is also in its
	// provenance).
	schemas := map[string]string{}
	for _, in := range infos {
		if in.Error != nil {
			t.Fatalf("tool %s: %v", in.Name, in.Error)
		}
		hash, _ := oci.SchemaDoc(in.Description, in.InputSchema, in.OutputSchema)
		schemas[in.Name] = hash
		if in.Name == "signed" && (in.Provenance == nil || in.Provenance.Schema != hash) {
			t.Fatalf("signed's provenance %+v; want schema %s", in.Provenance, hash)
		}
	}
	for _, c := range []struct{ tool, in string }{{"signed", `{"message":"hi"}`}, {"echo", `{"message":"hi"}`}, {"cmdecho", `{"command":"list"}`}} {
		res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: c.tool, Input: c.in})
		if err != nil || !res.OK {
			t.Fatalf("call %s: %+v %+v, %v", c.tool, res, res.Error, err)
		}
	}
	want := map[string]map[string]any{
		"signed":  {"component": pinned.Digest, "signer": key.ID, "component_local": nil, "schema": schemas["signed"]},
		"echo":    {"component": fileDigest(t, testkit.Component(t, "echo")), "signer": nil, "component_local": true, "schema": schemas["echo"]},
		"cmdecho": {"component": fileDigest(t, testkit.Component(t, "cmdecho")), "signer": nil, "component_local": true, "schema": schemas["cmdecho"]},
	}
	if schemas["echo"] != schemas["signed"] || schemas["cmdecho"] == schemas["echo"] {
		t.Fatalf("schema hashes %v: want signed's and echo's equal (one component), cmdecho's another", schemas)
	}
	for _, kind := range []string{"call-admitted", "call-succeeded"} {
		recs := auditOf(t, h, kind)
		if len(recs) != 3 {
			t.Fatalf("%d %s records, want 3: %v", len(recs), kind, recs)
		}
		for _, r := range recs {
			for field, w := range want[r["tool"].(string)] {
				if r[field] != w {
					t.Errorf("%s record of %s: %s %v, want %v (record %v)", kind, r["tool"], field, r[field], w, r)
				}
			}
		}
	}
}

// TestOCIStoreFileReplacedAfterLoad: the store's Load hashes an oci://
// tool's component file when agent.toml is loaded, and the runtime reads
// the file again later (its first call, tools/list, every version after a
// change). A file replaced in between by another valid component (one
// that would run and log) is refused by every such read, in both
// isolations: the call and tools/list name the tool, the layer digest the
// store verified and the digest of the bytes found, and the substitute's
// code never runs (no output, no log, its description never served). The
// verified bytes put back load again, and a substitute after a version
// was loaded and ran is refused the same way.
func TestOCIStoreFileReplacedAfterLoad(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "store")
			t.Setenv(oci.StoreEnv, store)
			srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
			defer srv.Close()
			ctx := context.Background()
			echo := testkit.Component(t, "echo")
			wasm, err := os.ReadFile(echo)
			if err != nil {
				t.Fatal(err)
			}
			pinned, err := oci.Push(ctx, oci.Ref{Registry: strings.TrimPrefix(srv.URL, "http://"), Repository: "tools/echo", Tag: "v1"}, wasm, nil)
			if err != nil {
				t.Fatal(err)
			}
			st, err := oci.OpenStore(store)
			if err != nil {
				t.Fatal(err)
			}
			comp, err := oci.Pull(ctx, pinned, st, nil)
			if err != nil {
				t.Fatal(err)
			}
			if comp.Layer != fileDigest(t, echo) {
				t.Fatalf("layer %s, want echo's %s", comp.Layer, fileDigest(t, echo))
			}
			h := newHostWith(t, `version = 1
[tools.remote]
path = "`+pinned.String()+`"
[agents.a]
tools = ["remote"]
grants = ["tool:invoke remote --..."]
[state]
path = "`+filepath.Join(t.TempDir(), "state.db")+`"
`, maiden.Options{Isolation: iso.iso})
			logger := testkit.Component(t, "logger")
			found := fileDigest(t, logger)
			// Every message names the tool, both digests and the kind.
			refusal := func(what, msg string) {
				t.Helper()
				t.Logf("%s: %s", what, msg)
				for _, w := range []string{"tool remote", oci.ErrDigestMismatch.Error(), "hashing to " + found, "not the layer " + comp.Layer} {
					if !strings.Contains(msg, w) {
						t.Fatalf("%s: %q does not say %q", what, msg, w)
					}
				}
			}
			refused := func(stage string) {
				t.Helper()
				res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "remote", Input: `{"message":"hi"}`})
				if err != nil {
					t.Fatalf("%s: call: %v", stage, err)
				}
				if res.OK || res.Error == nil || res.Error.Kind != maiden.KindInvalid || len(res.Logs) != 0 || res.Output != "" {
					t.Fatalf("%s: the substituted component ran or the call was not refused as invalid: %+v %+v", stage, res, res.Error)
				}
				refusal(stage+": call", res.Error.Message)
				infos, err := h.Tools(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(infos) != 1 || infos[0].Error == nil || infos[0].Description != "" {
					t.Fatalf("%s: tools/list %+v: want remote refused, no description", stage, infos)
				}
				refusal(stage+": tools/list", infos[0].Error.Message)
			}
			ran := func(stage string) {
				t.Helper()
				res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: "remote", Input: `{"message":"hi"}`})
				if err != nil || !res.OK || !strings.Contains(res.Output, "hi") {
					t.Fatalf("%s: call %+v %+v, %v: want echo's output", stage, res, res.Error, err)
				}
			}

			// Replaced after agent.toml's load, before anything read it.
			replaceFile(t, logger, comp.Path)
			refused("replaced before the first call")
			// The verified bytes back: they load and run.
			replaceFile(t, echo, comp.Path)
			ran("restored")
			// Replaced once a version was loaded and ran: the reload of the
			// changed file is refused.
			replaceFile(t, logger, comp.Path)
			refused("replaced after a call")
			// Written in place (same inode), as well as renamed over.
			replaceFile(t, echo, comp.Path)
			ran("restored again")
			if err := os.WriteFile(comp.Path, mustRead(t, logger), 0o644); err != nil {
				t.Fatal(err)
			}
			refused("rewritten in place")
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
