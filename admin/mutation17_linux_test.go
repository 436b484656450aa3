package admin

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// This file is the seventeenth mutation pass's (docs/security-tests.md,
// "Seventeenth pass"), Linux only: a thread of its own real user.

// TestInspectSQLiteNeedsWriteAccess: a store this user may read but not
// write (the file, or its directory, where the WAL and the journal go)
// is not OK, naming each. Tests run as root, which access(2) lets write
// anything, so the check runs with this thread's real user set to nobody
// (access(2) asks the real user; the effective one, still root, opens
// the store); as any other user, the store's file is made read-only
// instead.
func TestInspectSQLiteNeedsWriteAccess(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.db")
	s, err := OpenStore(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	var st *StoreStatus
	// Root's directory and file (0755, 0644) are nobody's to write;
	// another user can take write access away from its own file only
	// (without write access to the directory SQLite cannot read a WAL
	// store at all).
	want := []string{"write access to " + path, "write access to " + dir}
	if os.Getuid() != 0 {
		if err := os.Chmod(path, 0o444); err != nil {
			t.Fatal(err)
		}
		want = want[:1]
	}
	asRealUserNobody(t, func() {
		if syscall.Access(path, 2) == nil { // W_OK
			t.Fatal("this thread's real user may write the store")
		}
		st = Inspect(ctx, path)
	})
	var problems []string
	for _, m := range want {
		problems = append(problems, "this user lacks "+m)
	}
	if st.OK || !st.Reachable || st.SchemaState != "current" || !slices.Equal(st.MissingPrivileges, want) || !slices.Equal(st.Problems, problems) {
		t.Errorf("a store this user may not write: %+v; want it read (current), not OK, lacking %q", st, want)
	}
}
