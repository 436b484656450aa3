package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenDirNoFollow checks both ways of opening a preopened directory
// (openat2, and the O_NOFOLLOW walk kernels without it get): a directory
// opens; a symlink anywhere on the path, a file and a missing path are
// refused with a reason naming the path.
func TestOpenDirNoFollow(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "a", "b")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "a"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(base, "a", "leaf")); err != nil {
		t.Fatal(err)
	}
	for _, walk := range []bool{false, true} {
		forceWalk = walk
		name := map[bool]string{false: "openat2", true: "walk"}[walk]
		f, err := openDirNoFollow(dir)
		if err != nil {
			t.Fatalf("%s: %s: %v", name, dir, err)
		}
		fi, err := f.Stat()
		want, _ := os.Stat(dir)
		if err != nil || !os.SameFile(fi, want) {
			t.Errorf("%s: opened something else (%v)", name, err)
		}
		f.Close()
		for _, c := range []struct {
			path, reason string
			is           error
		}{
			{filepath.Join(base, "link", "b"), "symlink", nil},
			{filepath.Join(base, "a", "leaf"), "symlink", nil},
			{filepath.Join(dir, "f"), "not a directory", nil},
			{filepath.Join(base, "nope", "x"), "does not exist", os.ErrNotExist},
		} {
			_, err := OpenPreopens([]Preopen{{HostPath: c.path, GuestPath: "/g"}})
			var pe *PreopenError
			if !errors.As(err, &pe) || pe.Path != c.path || !strings.Contains(pe.Reason, c.reason) {
				t.Errorf("%s: %s: %v, want a PreopenError saying %q", name, c.path, err, c.reason)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("%s: %s: %v is not %v", name, c.path, err, c.is)
			}
		}
	}
	forceWalk = false
}
