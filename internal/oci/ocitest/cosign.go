package ocitest

import (
	"bytes"
	"context"
	"crypto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// CosignCLI finds the cosign CLI (v2.6.5, installed by scripts/deps):
// $MAIDEN_COSIGN, PATH, or GOPATH/bin (where go install puts it). Without
// it the test fails: CI installs it, so a missing one is a broken setup,
// not a reason to skip.
func CosignCLI(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("MAIDEN_COSIGN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("cosign"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	p := filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "bin", "cosign")
	if _, err := os.Stat(p); err != nil {
		t.Fatal("the cosign CLI is needed (scripts/deps installs it: go install github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5); or set MAIDEN_COSIGN")
	}
	return p
}

// RunCosign runs the CLI in dir with the key's password "pw", offline:
// its home and TUF cache are dir, and every HTTP request it would make to
// a host that is not loopback goes to a proxy on a closed loopback port
// (Go's proxy settings never apply to loopback), so only the test's
// registry and timestamp authority answer.
func RunCosign(t testing.TB, bin, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=pw", "HOME="+dir, "TUF_ROOT="+filepath.Join(dir, "tuf"),
		"HTTPS_PROXY=http://127.0.0.1:1", "HTTP_PROXY=http://127.0.0.1:1", "NO_PROXY=", "https_proxy=", "http_proxy=", "no_proxy=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// CosignKeyPair has the CLI make a key pair in dir (cosign.key, password
// "pw", and cosign.pub) and returns the public key.
func CosignKeyPair(t testing.TB, bin, dir string) crypto.PublicKey {
	t.Helper()
	if out, err := RunCosign(t, bin, dir, "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	pubPEM, err := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}
