//go:build linux

package safefs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Two defects pass 32 found (docs/security-tests.md, "Thirty-second pass").

// TestExactRootOnSlashGrantsOnlySlash: Root.Exact grants Path itself and
// nothing beneath it, "/" included: pick took an Exact root on "/" for a
// subtree root, so Root{Path: "/", Exact: true}, meant to grant the
// listing of "/" only, read every file of the machine. "/" itself stays
// listable (it has no parent to open it from).
func TestExactRootOnSlashGrantsOnlySlash(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		f := newFixture(t)
		roots := []Root{{Path: "/", Access: AccessRead, Exact: true}}
		if _, err := List(roots, "/", 1000); err != nil {
			t.Fatalf("List(/) under an Exact root on /: %v", err)
		}
		secret := filepath.Join(f.outside, "secret.txt")
		c, err := Read(roots, secret, 100)
		if err == nil {
			t.Fatalf("Read(%s) under only Root{Path: \"/\", Exact: true} = %q; want outside (an Exact root grants its own path only)", secret, c.Data)
		}
		wantKind(t, err, KindOutside)
		if _, err := List(roots, f.root, 1000); err == nil {
			t.Fatalf("List(%s) under only Root{Path: \"/\", Exact: true}: <nil>; want outside", f.root)
		} else {
			wantKind(t, err, KindOutside)
		}
	})
}

// TestNewAtomicFileKeepsTheUmask: WriteAtomic creates a new file 0644 less
// the umask, as documented: replace chmodded every temporary file to 0644,
// so under umask 077 a new file was readable by every user of the machine
// where the process asked for private files. A replaced file keeps its own
// bits whatever the umask.
func TestNewAtomicFileKeepsTheUmask(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	f := newFixture(t)
	roots := []Root{{Path: f.root, Access: AccessWrite}}
	p := filepath.Join(f.root, "new.txt")
	must(t, WriteAtomic(roots, p, []byte("x"), 10))
	st, err := os.Stat(p)
	must(t, err)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("WriteAtomic's new file under umask 077: mode %v; want 0600 (0644 less the umask, as documented)", st.Mode().Perm())
	}
	must(t, os.Chmod(p, 0o664))
	must(t, WriteAtomic(roots, p, []byte("y"), 10))
	if st, err = os.Stat(p); err != nil || st.Mode().Perm() != 0o664 {
		t.Fatalf("WriteAtomic over a 0664 file under umask 077: %v, %v; want its mode kept, 0664", st.Mode(), err)
	}
}
