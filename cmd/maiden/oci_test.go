package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/oci"
	"github.com/maiden-run/maiden/internal/oci/ocitest"
	"github.com/maiden-run/maiden/internal/statetest"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestOCIAddPullCall is the user's path end to end against a real
// registry on loopback: publish (signed), check refusing the tag alone
// and printing the digest, add, call; then with the registry gone, call
// again from the store; on a fresh store, pull refuses (registry down)
// naming it.
func TestOCIAddPullCall(t *testing.T) {
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "store"))
	host, srv := loopbackRegistry(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	cache := t.TempDir()
	cosignKeyPair(t, dir)

	ref := "oci://" + host + "/tools/echo:v1"
	r := cli(t, "", "publish", "-sign-key", filepath.Join(dir, "cosign.key"), testkit.Component(t, "echo"), ref)
	if r.code != exitOK {
		t.Fatalf("publish: exit %d: %s", r.code, r.stderr)
	}
	pinned := regexp.MustCompile(`path = "(oci://[^"]+@sha256:[0-9a-f]{64})"`).FindStringSubmatch(r.stdout)
	if pinned == nil {
		t.Fatalf("publish printed %q; want the pinned path", r.stdout)
	}

	// A tag alone: refused, with the digest to pin printed.
	writeFile(t, cfg, "version = 1\n[tools.echo]\npath = \""+ref+"\"\n")
	r = cli(t, "", "check", "-config", cfg, "-cache", cache)
	if r.code != exitUsage || !strings.Contains(r.stderr, "names a tag, which can move") || !strings.Contains(r.stderr, `to pin what the tag names now: path = "`+ref+"@"+strings.SplitN(pinned[1], "@", 2)[1]+`"`) {
		t.Fatalf("check of a tag alone: exit %d, stderr:\n%s", r.code, r.stderr)
	}

	// add pins it (signed) into a file that keeps its comments.
	writeFile(t, cfg, "# my agent\nversion = 1\n")
	r = cli(t, "", "add", "-config", cfg, "-key", filepath.Join(dir, "cosign.pub"), ref, "echo")
	if r.code != exitOK || !strings.Contains(r.stdout, "signed by key sha256:") {
		t.Fatalf("add: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(cfg)
	if want := regexp.MustCompile(`^# my agent\nversion = 1\n\n\[tools\.echo\]\npath = "` + regexp.QuoteMeta(ref+"@"+strings.SplitN(pinned[1], "@", 2)[1]) + `"\nverify = \{ key = "cosign\.pub" \}\nschema = "sha256:[0-9a-f]{64}"\n$`); !want.Match(b) {
		t.Fatalf("agent.toml after add:\n%s\nwant:\n%s", b, want)
	}
	call := func() cliResult {
		return cli(t, "", "call", "-config", cfg, "-cache", cache, "echo", `{"message":"hi"}`)
	}
	if r := call(); r.code != exitOK || r.stdout != "{\"message\":\"hi\"}\n" {
		t.Fatalf("call: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}

	// The provenance chain (issue 25): a declared agent's calls record
	// the component's digest and its signer; audit verify -provenance
	// re-checks offline that a configured key signed each recorded digest.
	pinnedEntry := string(b)
	agentCfg := pinnedEntry + "\n[agents.a]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --...\"]\n"
	writeFile(t, cfg, agentCfg)
	asAgent := func() {
		t.Helper()
		if r := cli(t, "", "call", "-config", cfg, "-cache", cache, "-agent", "a", "echo", `{"message":"hi"}`); r.code != exitOK {
			t.Fatalf("call as a: exit %d, stderr %s", r.code, r.stderr)
		}
	}
	asAgent()
	digest := strings.SplitN(pinned[1], "@", 2)[1]
	r = cli(t, "", "audit", "verify", "-provenance", "-config", cfg)
	if r.code != exitOK || !regexp.MustCompile(`(?m)^  ok     `+regexp.QuoteMeta(digest)+` \(echo, \d+ records\): signed by sha256:[0-9a-f]{64} \(.*cosign.pub\)$`).MatchString(r.stdout) {
		t.Fatalf("audit verify -provenance: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// The key no longer configured (the tool now loads unchecked): the
	// recorded signer is no key agent.toml names; the call made so is
	// recorded unsigned. Both fail, each saying why.
	writeFile(t, cfg, strings.Replace(agentCfg, "verify = { key = \"cosign.pub\" }\n", "", 1))
	asAgent()
	r = cli(t, "", "audit", "verify", "-provenance", "-config", cfg)
	if r.code != exitState || !strings.Contains(r.stdout, "is not a key (verify.key) or a keyless identity (verify.issuer, verify.identity) agent.toml configures") ||
		!strings.Contains(r.stdout, "FAILED "+digest+" (echo, ") || !strings.Contains(r.stdout, "recorded unsigned: no key verified it when it was loaded") ||
		!strings.Contains(r.stderr, "2 of 2 component(s) failed") {
		t.Fatalf("audit verify -provenance without the key: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	writeFile(t, cfg, pinnedEntry)

	srv.Close()
	if r := call(); r.code != exitOK {
		t.Fatalf("call with the registry down: exit %d, stderr %s", r.code, r.stderr)
	}
	r = cli(t, "", "pull", "-config", cfg)
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "have ") {
		t.Fatalf("pull with everything stored: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	// Another machine (a fresh store): the file does not load until
	// pulled, and pulling needs the registry.
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "fresh"))
	if r := call(); r.code != exitUsage || !strings.Contains(r.stderr, "is not in the local component store: run maiden pull") {
		t.Fatalf("call on a fresh store: exit %d, stderr %s", r.code, r.stderr)
	}
	r = cli(t, "", "pull", "-config", cfg)
	if r.code != exitUsage || !strings.Contains(r.stderr, "registry "+host+": ") {
		t.Fatalf("pull with the registry down: exit %d, stderr %s", r.code, r.stderr)
	}
}

// TestOCIRefusesTamperedStore: a component changed in the store after
// add does not load, and nothing runs.
func TestOCIRefusesTamperedStore(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	t.Setenv(oci.StoreEnv, store)
	host, _ := loopbackRegistry(t)
	echo, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := oci.Push(context.Background(), oci.Ref{Registry: host, Repository: "tools/echo", Tag: "v1"}, echo, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	writeFile(t, cfg, "version = 1\n")
	if r := cli(t, "", "add", "-config", cfg, pinned.String(), "echo"); r.code != exitOK {
		t.Fatalf("add: exit %d: %s", r.code, r.stderr)
	}
	layers, _ := filepath.Glob(filepath.Join(store, "blobs", "sha256", "*"))
	for _, l := range layers {
		b, _ := os.ReadFile(l)
		if len(b) == len(echo) {
			b[len(b)-1] ^= 1
			writeFile(t, l, string(b))
		}
	}
	r := cli(t, "", "call", "-config", cfg, "-cache", t.TempDir(), "echo", `{"message":"hi"}`)
	if r.code != exitUsage || !strings.Contains(r.stderr, "stored component: content does not match its digest") || r.stdout != "" {
		t.Fatalf("call of a tampered component: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOCIRegistryCredential: a registry that wants a login gets the one a
// maiden secret holds (MAIDEN_SECRET_NAME, named by -credential and then
// registry_credential), for publish, add and pull; agent.toml and every
// output name the secret, never its value; an unset secret is said before
// anything is sent.
func TestOCIRegistryCredential(t *testing.T) {
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "store"))
	const user, pass = "robot", "s3cret-registry-pass"
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
			refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"login"}]}`, http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	ref := "oci://" + host + "/private/echo:v1"
	noSecret := func(r cliResult) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, pass) {
			t.Fatalf("the registry password was printed:\n%s\n%s", r.stdout, r.stderr)
		}
	}

	// Without the login: refused by the registry.
	r := cli(t, "", "publish", testkit.Component(t, "echo"), ref)
	noSecret(r)
	if r.code != exitUsage || refused.Load() == 0 {
		t.Fatalf("publish without a login: exit %d (%d refused requests), stderr %s", r.code, refused.Load(), r.stderr)
	}
	// The secret named but not set: said before anything is sent.
	t.Setenv("MAIDEN_SECRET_REG", "")
	before := refused.Load()
	r = cli(t, "", "publish", "-credential", "REG", testkit.Component(t, "echo"), ref)
	if r.code != exitUsage || !strings.Contains(r.stderr, "registry credential REG: MAIDEN_SECRET_REG is not set") || refused.Load() != before {
		t.Fatalf("publish with the secret unset: exit %d, stderr %s", r.code, r.stderr)
	}
	t.Setenv("MAIDEN_SECRET_REG", user+":"+pass)
	r = cli(t, "", "publish", "-credential", "REG", testkit.Component(t, "echo"), ref)
	noSecret(r)
	if r.code != exitOK {
		t.Fatalf("publish with the login: exit %d, stderr %s", r.code, r.stderr)
	}

	writeFile(t, cfg, "version = 1\n")
	r = cli(t, "", "add", "-config", cfg, "-credential", "REG", ref, "echo")
	noSecret(r)
	if r.code != exitOK {
		t.Fatalf("add with the login: exit %d, stderr %s", r.code, r.stderr)
	}
	b, _ := os.ReadFile(cfg)
	if !strings.Contains(string(b), "registry_credential = \"REG\"\n") || strings.Contains(string(b), pass) {
		t.Fatalf("agent.toml after add:\n%s", b)
	}
	// Another machine: pull logs in with the file's registry_credential.
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "fresh"))
	t.Setenv("MAIDEN_SECRET_REG", "")
	if r := cli(t, "", "pull", "-config", cfg); r.code != exitUsage || !strings.Contains(r.stderr, "MAIDEN_SECRET_REG is not set") {
		t.Fatalf("pull with the secret unset: exit %d, stderr %s", r.code, r.stderr)
	}
	t.Setenv("MAIDEN_SECRET_REG", user+":wrong")
	if r := cli(t, "", "pull", "-config", cfg); r.code != exitUsage {
		t.Fatalf("pull with a wrong password: exit %d, stderr %s", r.code, r.stderr)
	}
	t.Setenv("MAIDEN_SECRET_REG", user+":"+pass)
	r = cli(t, "", "pull", "-config", cfg)
	noSecret(r)
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "pulled ") {
		t.Fatalf("pull with the login: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestOCIPublishDir: publish DIR builds the tool project as maiden build
// does (NAME.wasm beside its sources, loaded once), pushes and signs it,
// and prints only the path to paste, which add pins and call runs. A
// project that does not build pushes nothing.
func TestOCIPublishDir(t *testing.T) {
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "store"))
	host, _ := loopbackRegistry(t)
	cache := t.TempDir()
	keys := t.TempDir()
	cosignKeyPair(t, keys)
	src, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "testdata", "tools", "echo.wat"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "echo")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "tool.wat"), string(src))

	ref := "oci://" + host + "/tools/echo:v1"
	r := cli(t, "", "publish", "-cache", cache, "-isolation", "process", "-sign-key", filepath.Join(keys, "cosign.key"), dir, ref)
	m := regexp.MustCompile(`^path = "(` + regexp.QuoteMeta(ref) + `@sha256:[0-9a-f]{64})"\n$`).FindStringSubmatch(r.stdout)
	if r.code != exitOK || m == nil || !strings.Contains(r.stderr, "building echo (WAT)") {
		t.Fatalf("publish DIR: exit %d\nstdout: %q\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	built, err := os.ReadFile(filepath.Join(dir, "echo.wasm"))
	if err != nil {
		t.Fatalf("publish DIR left no built component where maiden build puts it: %v", err)
	}
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	writeFile(t, cfg, "version = 1\n")
	if r := cli(t, "", "add", "-config", cfg, "-cache", cache, "-key", filepath.Join(keys, "cosign.pub"), m[1], "echo"); r.code != exitOK || !strings.Contains(r.stdout, "signed by key sha256:") {
		t.Fatalf("add of the published path: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if r := cli(t, "", "call", "-config", cfg, "-cache", cache, "echo", `{"message":"hi"}`); r.code != exitOK || r.stdout != "{\"message\":\"hi\"}\n" {
		t.Fatalf("call of the published tool: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	// What was pushed is what was built: the store's layer has its bytes.
	layers, _ := filepath.Glob(filepath.Join(os.Getenv(oci.StoreEnv), "blobs", "sha256", "*"))
	found := false
	for _, l := range layers {
		if b, _ := os.ReadFile(l); string(b) == string(built) {
			found = true
		}
	}
	if !found {
		t.Fatal("the pulled component is not the built one")
	}

	// A project that does not build: the build's error, nothing pushed.
	writeFile(t, filepath.Join(dir, "tool.wat"), "(module\n  (func (i32.bogus)))\n")
	r = cli(t, "", "publish", "-cache", cache, dir, "oci://"+host+"/tools/echo:broken")
	if r.code != exitTool || r.stdout != "" || !strings.Contains(r.stderr, "tool.wat:2:") {
		t.Fatalf("publish of a project that does not build: exit %d\nstdout: %q\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if _, err := oci.Resolve(context.Background(), oci.Ref{Registry: host, Repository: "tools/echo", Tag: "broken"}, nil); err == nil {
		t.Fatal("a project that did not build was pushed")
	}
}

// TestOCIKeylessAdd: maiden add with a keyless verify (a Sigstore bundle
// attached as a referrer, checked against a trusted root made here) pins
// the component and writes the verify table; calls record the signer's
// identity and audit verify -provenance re-checks the stored bundle
// offline. A bundle by another identity is refused by add (nothing
// written), and a file naming another identity does not load (nothing
// runs). A record naming a digest the store holds no bundle of, as signed
// by the configured identity, fails the provenance check.
func TestOCIKeylessAdd(t *testing.T) {
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "store"))
	host, _ := loopbackRegistry(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	cache := t.TempDir()
	ss := ocitest.NewSigstore(t)
	writeFile(t, filepath.Join(dir, "trusted_root.json"), string(ss.TrustedRoot(t)))
	echo, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	const issuer, identity = "https://token.example", "release@acme.example"
	signed := func(repo, who string) string {
		p, err := oci.Push(context.Background(), oci.Ref{Registry: host, Repository: repo, Tag: "v1"}, echo, nil)
		if err != nil {
			t.Fatal(err)
		}
		ocitest.Attach(t, host, repo, p.Digest, ss.Bundle(t, ocitest.Signing{Identity: who, Issuer: issuer, Digest: p.Digest}))
		return oci.Ref{Registry: host, Repository: repo, Tag: "v1"}.String()
	}
	add := func(ref, name string) cliResult {
		return cli(t, "", "add", "-config", cfg, "-issuer", issuer, "-identity", identity, "-trusted-root", filepath.Join(dir, "trusted_root.json"), ref, name)
	}

	writeFile(t, cfg, "version = 1\n")
	r := add(signed("tools/mallory", "mallory@acme.example"), "mallory")
	if r.code != exitUsage || !strings.Contains(r.stderr, `signature invalid: not signed by keyless:`+issuer+` `+identity) || !strings.Contains(r.stderr, `expected SAN value "`+identity+`", got "mallory@acme.example"`) {
		t.Fatalf("add of a component signed by another identity: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(cfg); string(b) != "version = 1\n" {
		t.Fatalf("agent.toml after a refused add:\n%s", b)
	}

	ref := signed("tools/echo", identity)
	r = add(ref, "echo")
	signer := "keyless:" + issuer + " " + identity
	if r.code != exitOK || !strings.Contains(r.stdout, "(signed by "+signer+"; schema sha256:") {
		t.Fatalf("add: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(cfg)
	verifyLine := `verify = { issuer = "` + issuer + `", identity = "` + identity + `", trusted_root = "trusted_root.json" }` + "\n"
	if !strings.Contains(string(b), verifyLine+`schema = "sha256:`) {
		t.Fatalf("agent.toml after add:\n%s\nwant %s followed by the schema pin", b, verifyLine)
	}
	digest := regexp.MustCompile(`@(sha256:[0-9a-f]{64})"`).FindStringSubmatch(string(b))[1]
	agentCfg := string(b) + "\n[agents.a]\ntools = [\"echo\"]\ngrants = [\"tool:invoke echo --...\"]\n"
	writeFile(t, cfg, agentCfg)
	if r := cli(t, "", "call", "-config", cfg, "-cache", cache, "-agent", "a", "echo", `{"message":"hi"}`); r.code != exitOK || r.stdout != "{\"message\":\"hi\"}\n" {
		t.Fatalf("call: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "", "audit", "verify", "-provenance", "-config", cfg)
	if r.code != exitOK || !regexp.MustCompile(`(?m)^  ok     `+regexp.QuoteMeta(digest)+` \(echo, \d+ records\): signed by `+regexp.QuoteMeta(signer)+` \(.*trusted_root.json\)$`).MatchString(r.stdout) {
		t.Fatalf("audit verify -provenance: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	// Another machine (a fresh store): maiden pull fetches and verifies
	// the bundle again, then has it.
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "fresh"))
	for _, want := range []string{"pulled ", "have "} {
		if r := cli(t, "", "pull", "-config", cfg); r.code != exitOK || !strings.HasPrefix(r.stdout, want) {
			t.Fatalf("pull on a fresh store: exit %d, stdout %q (want %q), stderr %s", r.code, r.stdout, want, r.stderr)
		}
	}

	// agent.toml now names another identity: the stored bundle is not
	// that identity's, so the file does not load and nothing runs; the
	// recorded signer is no identity the file configures.
	writeFile(t, cfg, strings.Replace(agentCfg, `identity = "`+identity+`"`, `identity = "other@acme.example"`, 1))
	r = cli(t, "", "call", "-config", cfg, "-cache", cache, "-agent", "a", "echo", `{"message":"hi"}`)
	if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "no signature: the store holds no Sigstore bundle of "+digest+" by keyless:"+issuer+" other@acme.example") {
		t.Fatalf("call with another identity configured: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	writeFile(t, cfg, strings.Replace(agentCfg, verifyLine, "", 1))
	r = cli(t, "", "audit", "verify", "-provenance", "-config", cfg)
	if r.code != exitState || !strings.Contains(r.stdout, "signer "+signer+" is not a key (verify.key) or a keyless identity") {
		t.Fatalf("audit verify -provenance without the identity: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	// A record naming, as the configured identity's, a digest the store
	// holds no bundle of: the bundle is looked for in the store, and the
	// record's word is not taken for it.
	writeFile(t, cfg, agentCfg)
	forged := "sha256:" + strings.Repeat("0f", 32)
	statetest.AppendAudit(t, filepath.Join(dir, "maiden-state.db"), api.AuditRecord{Kind: admin.AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "echo",
		Body: json.RawMessage(`{"rendered":"--message=forged","component":"` + forged + `","signer":"` + signer + `"}`)})
	r = cli(t, "", "audit", "verify", "-provenance", "-config", cfg)
	if r.code != exitState || !strings.Contains(r.stdout, "\n  FAILED "+forged+" (echo, 1 records): ") || !strings.HasSuffix(r.stderr, "-provenance: 1 of 2 component(s) failed\n") {
		t.Fatalf("audit verify -provenance of a record naming a digest with no bundle as the identity's: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	// The stored bundle changed after the pull: the offline re-check of
	// every load refuses it, so neither a call nor the provenance check
	// gets past loading the file.
	bundles, _ := filepath.Glob(filepath.Join(os.Getenv(oci.StoreEnv), "signatures", "*-keyless-*.bundle.json"))
	if len(bundles) != 1 {
		t.Fatalf("stored bundles %v; want one", bundles)
	}
	bb, _ := os.ReadFile(bundles[0])
	writeFile(t, bundles[0], string(ocitest.Tamper(t, bb)))
	for _, args := range [][]string{{"call", "-config", cfg, "-cache", cache, "-agent", "a", "echo", `{"message":"hi"}`}, {"audit", "verify", "-provenance", "-config", cfg}} {
		r = cli(t, "", args...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "signature invalid: not signed by "+signer+": failed to verify log inclusion: transparency log signature does not match") {
			t.Fatalf("%s with a changed bundle: exit %d\nstdout: %s\nstderr: %s", args[0], r.code, r.stdout, r.stderr)
		}
	}
}

// loopbackRegistry starts an OCI registry (go-containerregistry's) on
// loopback for one test and returns its host:port and its server, closed
// when the test ends (or sooner, by a test that takes the registry down).
func loopbackRegistry(t *testing.T) (string, *httptest.Server) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), srv
}

// cosignKeyPair writes a cosign-compatible key pair (PKCS#8 private key,
// PEM public key) into dir as cosign.key and cosign.pub.
func cosignKeyPair(t *testing.T, dir string) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	privPEM, _ := cryptoutils.MarshalPrivateKeyToPEM(priv)
	pubPEM, _ := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	writeFile(t, filepath.Join(dir, "cosign.key"), string(privPEM))
	writeFile(t, filepath.Join(dir, "cosign.pub"), string(pubPEM))
}

// TestOCICosignSigned: components the real cosign CLI signed, the way
// cosign v3 does by default (a key-signed Sigstore bundle referrer) and
// keyless offline in its .sig tag layout (its key certified by a CA of a
// trust root made here, an RFC 3161 timestamp from that root's timestamp
// authority on loopback), are added, called, and re-checked by audit
// verify -provenance, offline.
func TestOCICosignSigned(t *testing.T) {
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "store"))
	bin := ocitest.CosignCLI(t)
	host, _ := loopbackRegistry(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.toml")
	cache := t.TempDir()
	pub := ocitest.CosignKeyPair(t, bin, dir)
	ss := ocitest.NewSigstore(t)
	const issuer, identity = "https://token.example", "release@acme.example"
	cert, chain := ss.Certify(t, pub, identity, issuer)
	writeFile(t, filepath.Join(dir, "cert.pem"), string(cert))
	writeFile(t, filepath.Join(dir, "chain.pem"), string(chain))
	writeFile(t, filepath.Join(dir, "trusted_root.json"), string(ss.TrustedRoot(t)))
	tsa := ss.TimestampAuthority(t)
	echo, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	// push pushes echo (with a custom section naming repo, so each
	// repository's digest is its own) and has cosign sign it.
	push := func(repo string, sign ...string) string {
		t.Helper()
		wasm := append(append(bytes.Clone(echo), 0, byte(len(repo)+1), byte(len(repo))), repo...)
		p, err := oci.Push(context.Background(), oci.Ref{Registry: host, Repository: repo, Tag: "v1"}, wasm, nil)
		if err != nil {
			t.Fatal(err)
		}
		args := append(append([]string{"sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-http-registry", "--yes"}, sign...), host+"/"+repo+"@"+p.Digest)
		if out, err := ocitest.RunCosign(t, bin, dir, args...); err != nil {
			t.Fatalf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return oci.Ref{Registry: host, Repository: repo, Tag: "v1"}.String()
	}

	writeFile(t, cfg, "version = 1\n")
	r := cli(t, "", "add", "-config", cfg, "-key", filepath.Join(dir, "cosign.pub"), push("tools/bundle", "--new-bundle-format"), "bundled")
	if r.code != exitOK || !strings.Contains(r.stdout, "signed by key sha256:") {
		t.Fatalf("add of a cosign bundle referrer: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "", "add", "-config", cfg, "-issuer", issuer, "-identity", identity, "-trusted-root", filepath.Join(dir, "trusted_root.json"), "-transparency-log=false",
		push("tools/keyless", "--certificate", "cert.pem", "--certificate-chain", "chain.pem", "--timestamp-server-url", tsa), "keyless")
	if r.code != exitOK || !strings.Contains(r.stdout, "(signed by keyless:"+issuer+" "+identity+"; schema sha256:") {
		t.Fatalf("add of a cosign keyless .sig tag signature: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(cfg)
	writeFile(t, cfg, string(b)+"\n[agents.a]\ntools = [\"bundled\", \"keyless\"]\ngrants = [\"tool:invoke bundled --...\", \"tool:invoke keyless --...\"]\n")
	for _, tool := range []string{"bundled", "keyless"} {
		if r := cli(t, "", "call", "-config", cfg, "-cache", cache, "-agent", "a", tool, `{"message":"hi"}`); r.code != exitOK || r.stdout != "{\"message\":\"hi\"}\n" {
			t.Fatalf("call %s: exit %d, stdout %q, stderr %s", tool, r.code, r.stdout, r.stderr)
		}
	}
	r = cli(t, "", "audit", "verify", "-provenance", "-config", cfg)
	if r.code != exitOK || !regexp.MustCompile(`(?m)^  ok     sha256:[0-9a-f]{64} \(bundled, \d+ records\): signed by sha256:[0-9a-f]{64} \(.*cosign.pub\)$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^  ok     sha256:[0-9a-f]{64} \(keyless, \d+ records\): signed by keyless:`+regexp.QuoteMeta(issuer+" "+identity)+` \(.*trusted_root.json\)$`).MatchString(r.stdout) {
		t.Fatalf("audit verify -provenance: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// TestOCIPullTimeout (finding 1 of the fifth review): maiden pull from a
// registry that never finishes answering gives up after -timeout, naming
// the registry, the stage and the artifact, and says how to allow more.
func TestOCIPullTimeout(t *testing.T) {
	t.Setenv(oci.StoreEnv, filepath.Join(t.TempDir(), "store"))
	digest := "sha256:" + strings.Repeat("5", 64)
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	gone := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/slow/echo/manifests/"+digest {
			reg.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Length", "4096")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("{"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes
		gone <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	writeFile(t, cfg, "version = 1\n[tools.echo]\npath = \"oci://"+host+"/slow/echo@"+digest+"\"\n")

	r := cli(t, "", "pull", "-config", cfg, "-timeout", "1s")
	want := "registry " + host + ": manifest " + digest + ": not finished within the deadline of 1s"
	if r.code != exitUsage || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "-timeout allows more time") {
		t.Fatalf("pull from a stalled registry: exit %d, stderr:\n%s\nwant %q", r.code, r.stderr, want)
	}
	<-gone
}
