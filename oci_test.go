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
// it (the chain signature → digest → audit record); a local tool's record
// names neither.
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
[agents.a]
tools = ["signed", "echo"]
grants = ["tool:invoke signed --...", "tool:invoke echo --..."]
[state]
path = "`+filepath.Join(t.TempDir(), "state.db")+`"
`, maiden.Options{Isolation: maiden.InProcess}, "echo")
	for _, tool := range []string{"signed", "echo"} {
		res, err := h.Call(ctx, maiden.Call{Agent: "a", Tool: tool, Input: `{"message":"hi"}`})
		if err != nil || !res.OK {
			t.Fatalf("call %s: %+v, %v", tool, res, err)
		}
	}
	recs := auditOf(t, h, "call-admitted")
	if len(recs) != 2 {
		t.Fatalf("%d call-admitted records, want 2: %v", len(recs), recs)
	}
	for _, r := range recs {
		want := map[string]any{"signed": pinned.Digest, "echo": nil}[r["tool"].(string)]
		wantSigner := map[string]any{"signed": key.ID, "echo": nil}[r["tool"].(string)]
		if r["component"] != want || r["signer"] != wantSigner {
			t.Errorf("record of %s: component %v, signer %v; want %v, %v", r["tool"], r["component"], r["signer"], want, wantSigner)
		}
	}
}
