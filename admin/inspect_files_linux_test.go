package admin

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
)

// state check of a SQLite store changes nothing: no file made and left
// beside the store, no byte of it changed, whoever runs it (sqliteCheckURI).

// names lists dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// asRealUserNobody runs f on a thread whose real user is nobody (access(2)
// asks the real user; the effective one, root, still opens files), when
// the test runs as root; as any other user it runs f as it is. The thread
// stays locked: it ends with the test's goroutine, whatever its
// credentials then.
func asRealUserNobody(t *testing.T, f func()) {
	t.Helper()
	if os.Getuid() != 0 {
		f()
		return
	}
	runtime.LockOSThread()
	const nobody = 65534
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, nobody, ^uintptr(0), ^uintptr(0)); e != 0 {
		t.Fatalf("setresuid: %v", e)
	}
	f()
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, 0, ^uintptr(0), ^uintptr(0)); e != 0 {
		t.Fatalf("setresuid back: %v", e)
	}
}

// TestStateCheckLeavesNothing: a check of a store no process has open
// leaves no -wal or -shm file beside it and changes no byte of it, whether
// this user may write the store or not; a check of a store a process has
// open leaves nothing once that process closes it.
func TestStateCheckLeavesNothing(t *testing.T) {
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
	before := names(t, dir)
	if !slices.Equal(before, []string{"s.db"}) {
		t.Fatalf("a closed store's directory: %q; want s.db only", before)
	}
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(how string) {
		t.Helper()
		if got := names(t, dir); !slices.Equal(got, before) {
			t.Errorf("%s: the check left %q; want %q", how, got, before)
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, content) {
			t.Errorf("%s: the store's bytes changed (%d bytes, want %d; %v)", how, len(got), len(content), err)
		}
	}

	st := Inspect(ctx, path)
	if !st.OK || st.SchemaState != "current" {
		t.Fatalf("a store this user may write: %+v; want OK and current", st)
	}
	unchanged("a store this user may write")

	// This user may not write it (as root, the real user nobody; as
	// another user, the file made read-only).
	if os.Getuid() != 0 {
		if err := os.Chmod(path, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	asRealUserNobody(t, func() { st = Inspect(ctx, path) })
	if st.OK || st.SchemaState != "current" || len(st.MissingPrivileges) == 0 {
		t.Fatalf("a store this user may not write: %+v; want it read (current) and write access missing", st)
	}
	unchanged("a store this user may not write")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}

	// A store a process has open: its -wal and -shm are that process's,
	// read as they are, and removed when it closes the store.
	s, err = OpenStore(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if open := names(t, dir); !slices.Equal(open, []string{"s.db", "s.db-shm", "s.db-wal"}) {
		t.Fatalf("an open store's directory: %q; want s.db and its -shm and -wal", open)
	}
	st = Inspect(ctx, path)
	if !st.OK || st.SchemaState != "current" {
		t.Errorf("a store a process has open: %+v; want OK and current", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, before) {
		t.Errorf("a store a process had open during the check, once it closed it: %q; want %q", got, before)
	}
}

// TestStateCheckReadsThePathAsWritten: a path is the file it names, '%'
// included (a SQLite URI would read "%41" as "A"); one holding '?' or '#',
// which the store refuses too, is a problem saying so.
func TestStateCheckReadsThePathAsWritten(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "st%41.db")
	s, err := OpenStore(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st := Inspect(ctx, path); !st.OK || st.SchemaState != "current" {
		t.Errorf("Inspect(%s): %+v; want OK and current", path, st)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"st%41.db"}) {
		t.Errorf("the check of %s left %q", path, got)
	}
	odd := filepath.Join(dir, "a?b.db")
	if err := os.WriteFile(odd, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want := `state store "` + odd + `": the path must hold no '?', '#' or NUL`
	if st := Inspect(ctx, odd); st.OK || !slices.Equal(st.Problems, []string{want}) {
		t.Errorf("Inspect(%s): %+v; want only the problem %q", odd, st, want)
	}
}
