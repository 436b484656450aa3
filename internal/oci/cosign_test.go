package oci

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cosignBin finds the cosign CLI (v2.6.5, installed by scripts/deps):
// $MAIDEN_COSIGN, PATH, or GOPATH/bin (where go install puts it).
func cosignBin(t *testing.T) string {
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

// cosign runs the CLI with the key's password, offline: with the
// transparency log off and a loopback registry, it reaches nothing else.
func cosign(t *testing.T, bin, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=pw", "HOME="+dir, "TUF_ROOT="+filepath.Join(dir, "tuf"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestCosignInterop checks signatures against the real cosign CLI in both
// directions, with a key pair cosign generated (its encrypted cosign.key
// format): what `cosign sign --key` attaches verifies here, what Sign
// attaches passes `cosign verify --key`, and cosign refuses what nobody
// signed (so its acceptance means something).
func TestCosignInterop(t *testing.T) {
	bin := cosignBin(t)
	host, _ := testRegistry(t)
	ctx := context.Background()
	dir := t.TempDir()
	if out, err := cosign(t, bin, dir, "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	pubPEM, err := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "cosign.key"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParseKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	other := newKeyPair(t)
	name := func(r Ref) string { return r.Registry + "/" + r.Repository + "@" + r.Digest }

	t.Run("cosign signs, maiden verifies", func(t *testing.T) {
		t.Parallel()
		p := push(t, "oci://"+host+"/cosign/signed-by-cosign:v1", echo(t))
		if out, err := cosign(t, bin, dir, "sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-http-registry", "--yes", name(p)); err != nil {
			t.Fatalf("cosign sign: %v\n%s", err, out)
		}
		c, err := Pull(ctx, p, newStore(t), &PullOptions{Key: pub})
		if err != nil || c.Signer != pub.ID {
			t.Fatalf("Pull of a cosign-signed component = %+v, %v", c, err)
		}
		if _, err := Pull(ctx, p, newStore(t), &PullOptions{Key: other.pub}); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("Pull with another key = %v; want ErrBadSignature", err)
		}
	})
	t.Run("maiden signs, cosign verifies", func(t *testing.T) {
		t.Parallel()
		p := push(t, "oci://"+host+"/cosign/signed-by-maiden:v1", echo(t))
		verify := func() (string, error) {
			return cosign(t, bin, dir, "verify", "--key", "cosign.pub", "--insecure-ignore-tlog", "--allow-http-registry", name(p))
		}
		if out, err := verify(); err == nil {
			t.Fatalf("cosign verify accepted an unsigned component:\n%s", out)
		}
		s, err := ParseSigner(keyPEM, func() ([]byte, error) { return []byte("pw"), nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := Sign(ctx, p, s, nil); err != nil {
			t.Fatal(err)
		}
		if out, err := verify(); err != nil {
			t.Fatalf("cosign verify of what Sign attached: %v\n%s", err, out)
		}
	})
}
