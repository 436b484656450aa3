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
