package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maiden-run/maiden/internal/oci"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// ociFiles is fakeFiles with a store: it answers for testDigest with a
// component signed by any key, and with err for every other digest.
func ociFiles(t *testing.T, err error) fileSystem {
	fs := fakeFiles(t)
	fs.component = func(r oci.Ref, src *OCISource) (oci.Component, error) {
		if r.Digest != testDigest {
			return oci.Component{}, fmt.Errorf("load %s: %w", r, err)
		}
		c := oci.Component{Ref: r, Path: "/store/blobs/sha256/layer", Digest: r.Digest, Layer: testLayer}
		if src.Key != "" {
			c.Signer = "sha256:key-of-" + src.Key
		}
		if kl := src.Keyless; kl != nil {
			c.Signer = oci.KeylessID(kl.Issuer, kl.Identity) + " under " + kl.TrustedRoot
		}
		return c, nil
	}
	// The store holds testSchema's document, and none for another hash.
	fs.schema = func(hash string) error {
		if hash != testSchema {
			return fmt.Errorf("schema %s: %w", hash, err)
		}
		return nil
	}
	return fs
}

// testLayer is the layer digest the fake store verified the component as.
const testLayer = "sha256:" + "1a7e" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"

const testSchema = "sha256:" + "5c4e" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"

func TestOCIPath(t *testing.T) {
	other := "sha256:" + strings.Repeat("f", 64)
	for _, tt := range []struct {
		name    string
		toml    string
		storeIs error
		want    *OCISource
		wantErr string
	}{
		{name: "pinned", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"`,
			want: &OCISource{Ref: "oci://ghcr.io/acme/echo@" + testDigest, Digest: testDigest, Layer: testLayer}},
		{name: "pinned with its tag and a key", toml: `path = "oci://ghcr.io/acme/echo:v1@` + testDigest + `"` + "\nverify = { key = \"cosign.pub\" }",
			want: &OCISource{Ref: "oci://ghcr.io/acme/echo:v1@" + testDigest, Digest: testDigest, Layer: testLayer, Key: "/base/cosign.pub", Signer: "sha256:key-of-/base/cosign.pub"}},
		{name: "tag alone", toml: `path = "oci://ghcr.io/acme/echo:v1"`,
			wantErr: `agent.toml:3: tools.w.path: "oci://ghcr.io/acme/echo:v1" names a tag, which can move: pin its digest (maiden check prints it; maiden add oci://ghcr.io/acme/echo:v1 NAME writes it)`},
		{name: "malformed", toml: `path = "oci://ghcr.io/acme/echo@sha256:12"`,
			wantErr: `agent.toml:3: tools.w.path: malformed oci:// reference: digest "sha256:12": want sha256: and 64 lowercase hex digits`},
		{name: "not pulled", toml: `path = "oci://ghcr.io/acme/echo@` + other + `"`, storeIs: oci.ErrNotInStore,
			wantErr: `agent.toml:3: tools.w.path: "oci://ghcr.io/acme/echo@` + other + `" is not in the local component store: run maiden pull (it fetches every pinned tool of this file)`},
		{name: "store refuses", toml: `path = "oci://ghcr.io/acme/echo@` + other + `"`, storeIs: oci.ErrBadSignature,
			wantErr: `agent.toml:3: tools.w.path: load oci://ghcr.io/acme/echo@` + other + `: signature invalid`},
		{name: "verify on a local file", toml: `path = "w.wasm"` + "\nverify = { key = \"cosign.pub\" }",
			wantErr: `agent.toml:4: tools.w.verify: verify checks the signature of an oci:// component; path is a local file`},
		{name: "registry credential", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nregistry_credential = \"GHCR\"",
			want: &OCISource{Ref: "oci://ghcr.io/acme/echo@" + testDigest, Digest: testDigest, Layer: testLayer, Credential: "GHCR"}},
		{name: "registry credential not a name", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nregistry_credential = \"user:token\"",
			wantErr: `agent.toml:4: tools.w.registry_credential: must be a secret's NAME (A-Z, 0-9, _), whose value (USER:PASSWORD, or a registry token) comes from MAIDEN_SECRET_NAME, got "user:token"`},
		{name: "registry credential on a local file", toml: `path = "w.wasm"` + "\nregistry_credential = \"GHCR\"",
			wantErr: `agent.toml:4: tools.w.registry_credential: registry_credential logs in to the registry of an oci:// component; path is a local file`},
		{name: "schema pinned", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nschema = \"" + testSchema + "\"",
			want: &OCISource{Ref: "oci://ghcr.io/acme/echo@" + testDigest, Digest: testDigest, Layer: testLayer, Schema: testSchema}},
		{name: "schema not in the store", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nschema = \"" + other + "\"", storeIs: oci.ErrNotInStore,
			wantErr: `agent.toml:3: tools.w.schema: the schema ` + other + ` pins is not in the local component store: run maiden pull (it records the schema of every pinned tool of this file)`},
		{name: "schema changed in the store", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nschema = \"" + other + "\"", storeIs: oci.ErrDigestMismatch,
			wantErr: `agent.toml:3: tools.w.schema: schema ` + other + `: content does not match its digest`},
		{name: "schema malformed", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nschema = \"sha256:XY\"",
			wantErr: `agent.toml:4: tools.w.schema: must be the hash maiden add recorded, sha256: and 64 lowercase hex digits, got "sha256:XY"`},
		{name: "schema on a local file", toml: `path = "w.wasm"` + "\nschema = \"" + testSchema + "\"",
			wantErr: `agent.toml:4: tools.w.schema: schema pins the definition of an oci:// component; path is a local file`},
		{name: "verify without key", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nverify = { keys = \"cosign.pub\" }",
			wantErr: "agent.toml:4: tools.w.verify.keys: unknown key; valid keys here: key, issuer, identity, trusted_root, transparency_log\nagent.toml:4: tools.w.verify.key: required key is missing: the cosign public key file the component must be signed with (or issuer, identity and trusted_root for a keyless signature)"},
		{name: "keyless", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nverify = { issuer = \"https://token.example\", identity = \"ci@acme.example\", trusted_root = \"trusted_root.json\" }",
			want: &OCISource{Ref: "oci://ghcr.io/acme/echo@" + testDigest, Digest: testDigest, Layer: testLayer,
				Keyless: &KeylessVerify{Issuer: "https://token.example", Identity: "ci@acme.example", TrustedRoot: "/base/trusted_root.json", TransparencyLog: true},
				Signer:  "keyless:https://token.example ci@acme.example under /base/trusted_root.json"}},
		{name: "keyless without the log", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nverify = { issuer = \"https://token.example\", identity = \"ci@acme.example\", trusted_root = \"trusted_root.json\", transparency_log = false }",
			want: &OCISource{Ref: "oci://ghcr.io/acme/echo@" + testDigest, Digest: testDigest, Layer: testLayer,
				Keyless: &KeylessVerify{Issuer: "https://token.example", Identity: "ci@acme.example", TrustedRoot: "/base/trusted_root.json"},
				Signer:  "keyless:https://token.example ci@acme.example under /base/trusted_root.json"}},
		{name: "keyless without identity", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nverify = { issuer = \"https://token.example\", trusted_root = \"trusted_root.json\" }",
			wantErr: "agent.toml:4: tools.w.verify.identity: required key is missing: a keyless verify names the issuer, the identity and the trusted_root file"},
		{name: "keyless without trusted root", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nverify = { issuer = \"https://token.example\", identity = \"ci@acme.example\" }",
			wantErr: "agent.toml:4: tools.w.verify.trusted_root: required key is missing: a keyless verify names the issuer, the identity and the trusted_root file"},
		{name: "key and keyless", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nverify = { key = \"cosign.pub\", identity = \"ci@acme.example\" }",
			wantErr: "agent.toml:4: tools.w.verify: key verifies a cosign key's signature, identity a keyless one: give one or the other"},
		{name: "keyless identity with a space", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nverify = { issuer = \"https://token.example\", identity = \"ci @acme\", trusted_root = \"trusted_root.json\" }",
			wantErr: `agent.toml:4: tools.w.verify.identity: must be the exact certificate identity (an email or a URI), without spaces, got "ci @acme"`},
		{name: "keyless log not a bool", toml: `path = "oci://ghcr.io/acme/echo@` + testDigest + `"` + "\nverify = { issuer = \"https://token.example\", identity = \"ci@acme.example\", trusted_root = \"trusted_root.json\", transparency_log = \"no\" }",
			wantErr: `agent.toml:4: tools.w.verify.transparency_log: must be true or false, got string "no"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := "version = 1\n[tools.w]\n" + tt.toml + "\n"
			cfg, err := parse("agent.toml", []byte(src), "/base", ociFiles(t, tt.storeIs))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("parse error:\n%v\nwant:\n%s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w, _ := cfg.Tool("w")
			if diff := cmp.Diff(tt.want, w.OCI); diff != "" || w.Path != "/store/blobs/sha256/layer" {
				t.Fatalf("OCI mismatch (-want +got):\n%s\npath %q", diff, w.Path)
			}
		})
	}
}

// TestOCIPinErrorCarriesTheReference: maiden check finds the unpinned
// reference in the error to resolve it.
func TestOCIPinErrorCarriesTheReference(t *testing.T) {
	_, err := parse("agent.toml", []byte("version = 1\n[tools.w]\npath = \"oci://ghcr.io/acme/echo:v2\"\n"), "/base", ociFiles(t, nil))
	var pe *oci.PinError
	if !errors.As(err, &pe) || pe.Ref.Tag != "v2" || pe.Ref.Repository != "acme/echo" || !errors.Is(err, oci.ErrNotPinned) {
		t.Fatalf("error %v: want an *oci.PinError for acme/echo:v2", err)
	}
}

func TestRequireSignatures(t *testing.T) {
	pinned := `path = "oci://ghcr.io/acme/echo@` + testDigest + `"`
	if cfg, err := parse("agent.toml", []byte("version = 1\n[tools.w]\npath = \"w.wasm\"\n"), "/base", ociFiles(t, nil)); err != nil || cfg.RequireSignatures() {
		t.Fatalf("without require_signatures: RequireSignatures() true or %v", err)
	}
	for _, tt := range []struct {
		name, tool, wantErr string
	}{
		{"signed", pinned + "\nverify = { key = \"cosign.pub\" }", ""},
		{"signed keyless", pinned + "\nverify = { issuer = \"https://token.example\", identity = \"ci@acme.example\", trusted_root = \"trusted_root.json\" }", ""},
		{"oci without verify", pinned,
			`agent.toml:3: tools.w.verify: require_signatures = true, and the tool's path is an oci:// reference without verify: give it an oci:// path and verify = { key = "cosign.pub" } or verify = { issuer = "...", identity = "...", trusted_root = "trusted_root.json" }`},
		{"local file", `path = "w.wasm"`,
			`agent.toml:3: tools.w.verify: require_signatures = true, and the tool's path is a local file: give it an oci:// path and verify = { key = "cosign.pub" } or verify = { issuer = "...", identity = "...", trusted_root = "trusted_root.json" }`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := "version = 1\nrequire_signatures = true\n[tools.w]\n" + tt.tool + "\n"
			cfg, err := parse("agent.toml", []byte(src), "/base", ociFiles(t, nil))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !cfg.RequireSignatures() {
					t.Fatal("RequireSignatures() = false; audit verify -provenance reads it")
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("parse error:\n%v\nwant:\n%s", err, tt.wantErr)
			}
		})
	}
}
