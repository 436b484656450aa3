//go:build linux

package confine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenNoFollow: a writable path's rule is opened without following a symlink anywhere on it (the path itself,
// or a directory on its way), under openat2 and under the walk; real paths, files and directories, open.
func TestOpenNoFollow(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"real/sub", "other"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "real", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"real/link": "../other", "alink": "real", "real/flink": "f"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, walk := range []bool{false, true} {
		walkForTesting = walk
		for _, p := range []string{"real", "real/sub", "real/f"} {
			fd, err := openNoFollow(filepath.Join(dir, p))
			if err != nil {
				t.Errorf("walk %v: %s: %v", walk, p, err)
				continue
			}
			unix.Close(fd)
		}
		for _, p := range []string{"real/link", "alink/sub", "alink", "real/flink", "real/link/x"} {
			fd, err := openNoFollow(filepath.Join(dir, p))
			if err == nil {
				unix.Close(fd)
			}
			if !errors.Is(err, unix.ELOOP) {
				t.Errorf("walk %v: %s: %v, want ELOOP", walk, p, err)
			}
		}
	}
	walkForTesting = false
}
