package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestOpenPinned: the pool's parent hashes the bytes it read (the
// artifact's key) and refuses, with a *sandbox.DigestError naming both
// digests, a file pinned to another digest before a worker compiles or
// describes it (no compiled code is kept for it); pinned to its own digest
// it opens as Open does. A version loaded for an unpinned caller is still
// checked for a pinned one, and a refusal under one pin is not served to a
// caller without it.
func TestOpenPinned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPool(t, &Options{Size: 1})
	echo, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "component.wasm")
	if err := os.WriteFile(path, echo, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(echo)
	ownHex := hex.EncodeToString(sum[:])
	own, other := "sha256:"+ownHex, "sha256:"+hex.EncodeToString(make([]byte, 32))

	refused := func(what string) {
		t.Helper()
		_, err := p.OpenPinned(ctx, path, other, lim)
		var de *sandbox.DigestError
		if !errors.As(err, &de) || !errors.Is(err, sandbox.ErrInvalidTool) || de.Want != other || de.Got != own {
			t.Fatalf("%s: OpenPinned(%s): %v; want a *sandbox.DigestError, got %s", what, other, err, own)
		}
	}
	refused("fresh")
	if _, ok := p.mem.Get(ownHex); ok {
		t.Fatal("refused bytes were compiled")
	}
	if _, err := p.Open(ctx, path, lim); err != nil {
		t.Fatalf("an unpinned Open after a pinned refusal: %v", err)
	}
	refused("loaded for an unpinned caller")
	tl, err := p.OpenPinned(ctx, path, own, lim)
	if err != nil || tl.Digest != ownHex {
		t.Fatalf("OpenPinned(own digest): %v, %v", tl, err)
	}
	out, err := tl.Execute(ctx, sandbox.Call{Limits: lim, Input: `{"message":"hi"}`})
	if err != nil || out.Failure != nil {
		t.Fatalf("execute: %+v, %v", out, err)
	}
}
