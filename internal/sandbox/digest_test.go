package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// fileSHA256 is the SHA-256 of the file at path, "sha256:HEX".
func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestOpenPinned: a file opened pinned to a digest its bytes do not hash
// to is refused with a *DigestError naming both, before anything of it is
// compiled (nothing reaches the disk cache) or described; pinned to its
// own digest it opens as Open does, to the same version, and allocates
// nothing more than Open on an already-loaded version. A version loaded
// for an unpinned caller is still checked for a pinned one, and a refusal
// under one pin is not served to a caller with another (or none).
func TestOpenPinned(t *testing.T) {
	ctx := context.Background()
	cacheDir := t.TempDir()
	sb := newSandbox(t, &Options{CacheDir: cacheDir})
	echo := testkit.Component(t, "echo")
	path := filepath.Join(t.TempDir(), "component.wasm")
	if err := os.WriteFile(path, readFile(t, echo), 0o600); err != nil {
		t.Fatal(err)
	}
	own, other := fileSHA256(t, echo), fileSHA256(t, testkit.Component(t, "logger"))

	refused := func(what, want string) {
		t.Helper()
		_, err := sb.OpenPinned(ctx, path, want, defaultLimits)
		var de *DigestError
		if !errors.As(err, &de) || !errors.Is(err, ErrInvalidTool) || de.Want != want || de.Got != own || de.Path != path {
			t.Fatalf("%s: OpenPinned(%s): %v; want a *DigestError, want %s, got %s", what, want, err, want, own)
		}
	}
	refused("fresh", other)
	if arts, _ := filepath.Glob(filepath.Join(cacheDir, "*", "*.cwasm")); len(arts) != 0 {
		t.Fatalf("refused bytes were compiled: %v", arts)
	}
	refused("refused again, from the cache", other)
	refused("not a digest", "md5:"+own[len("sha256:"):])

	plain, err := sb.Open(ctx, path, defaultLimits)
	if err != nil {
		t.Fatalf("an unpinned Open after a pinned refusal: %v", err)
	}
	refused("loaded for an unpinned caller", other)
	pinned, err := sb.OpenPinned(ctx, path, own, defaultLimits)
	if err != nil || pinned != plain {
		t.Fatalf("OpenPinned(own digest) = %p, %v; want Open's version %p", pinned, err, plain)
	}
	if "sha256:"+pinned.Digest != own {
		t.Fatalf("LoadInfo.Digest %s, want %s", pinned.Digest, own)
	}
	base := testing.AllocsPerRun(50, func() { _, _ = sb.Open(ctx, path, defaultLimits) })
	got := testing.AllocsPerRun(50, func() { _, _ = sb.OpenPinned(ctx, path, own, defaultLimits) })
	if got > base {
		t.Fatalf("OpenPinned of a loaded version allocates %v, Open %v", got, base)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
