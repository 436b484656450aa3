//go:build unix

package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestStateFileCreatedPrivate: a new state store and the files SQLite
// keeps beside it are readable by this user only, whatever the umask lets
// through (022 here, the common default): they hold the audit trail with
// every call's rendered arguments, the approvals and the token hashes,
// like the audit journal beside them (0700 directory, 0600 files).
func TestStateFileCreatedPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path, nil)
	if err := s.Journal().Append(AuditRecord{Kind: AuditCallAdmitted, Agent: "a", Tool: "t", Body: auditBody(map[string]any{"x": 1})}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %#o; want no access for group or others (0600)", filepath.Base(p), perm)
		}
	}
}

// TestOpenRefusesStateOthersCanWrite: a state file, a side file (which
// SQLite replays into the database: a planted -wal is a planted grant) or
// a directory that other users can write is refused before SQLite reads
// anything, naming what and why. A sticky directory such as /tmp is
// refused too: others can take the side files' names there first.
func TestOpenRefusesStateOthersCanWrite(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, want string
		plant      func(dir, path string) error
	}{
		{"file", "state.db has mode 0666", func(dir, path string) error {
			return plant(path, nil, 0o666)
		}},
		{"wal", "state.db-wal has mode 0666", func(dir, path string) error {
			if err := plant(path, nil, 0o600); err != nil {
				return err
			}
			return plant(path+"-wal", []byte("planted frames"), 0o666)
		}},
		{"shm link", "state.db-shm is not a regular file", func(dir, path string) error {
			return os.Symlink(filepath.Join(dir, "elsewhere"), path+"-shm")
		}},
		{"sticky dir", "has mode 01777, writable by other users", func(dir, path string) error {
			return os.Chmod(dir, os.ModeSticky|0o777)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.db")
			if err := c.plant(dir, path); err != nil {
				t.Fatal(err)
			}
			s, err := Open(context.Background(), path, nil)
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded over a state store others can write (%s)", c.name)
			}
			if !errors.Is(err, ErrStateUnsafe) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v\nwant ErrStateUnsafe naming %q", err, c.want)
			}
			if c.name == "sticky dir" {
				if _, err := os.Lstat(path); err == nil {
					t.Errorf("a refused Open left %s behind", path)
				}
			}
		})
	}
}

// TestOpenRefusesStateOwnedByAnother: a state file, or a side file, owned
// by another user is refused (that user can write it whatever its mode
// says, by chmod). Changing a file's owner needs root: the test runs only
// as root, which a non-root maiden's check covers alike.
func TestOpenRefusesStateOwnedByAnother(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	for _, side := range []string{"", "-shm"} {
		t.Run("file"+side, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.db")
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if side != "" {
				if err := os.WriteFile(path+side, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chown(path+side, 4242, 4242); err != nil {
				t.Fatal(err)
			}
			s, err := Open(context.Background(), path, nil)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded over a state file owned by uid 4242")
			}
			want := "state.db" + side + " is owned by uid 4242, not by this process's uid 0"
			if !errors.Is(err, ErrStateUnsafe) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open: %v\nwant ErrStateUnsafe naming %q", err, want)
			}
		})
	}
}

// plant writes a file with exactly mode perm, whatever the umask.
func plant(path string, data []byte, perm os.FileMode) error {
	if err := os.WriteFile(path, data, perm); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}

// TestOpenClosesOldStateToOthers: a state store an older maiden let SQLite
// make readable by every local user (0644, and its side files with it)
// is made private to its owner and group when opened: the audit trail's
// rendered arguments, the approvals and the token hashes are no longer
// readable by others. The group's read bit stays (a backup user's group
// may be given it on purpose).
func TestOpenClosesOldStateToOthers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s := open(t, path, nil)
	if err := s.Journal().Append(AuditRecord{Kind: AuditCallAdmitted, Agent: "a", Tool: "t", Body: auditBody(map[string]any{"x": 1})}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// As a store made before 2026-12-05 was: the main file 0644, and its
	// log with the same mode (an empty one, as a crash can leave it).
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := plant(path+"-wal", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, nil)
	defer s.Close()
	for p, want := range map[string]os.FileMode{path: 0o640, path + "-wal": 0o640} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s has mode %#o after Open; want %#o (others' access taken off, the group's kept)", filepath.Base(p), got, want)
		}
	}
}

// TestCloseToOthersFollowsNoLink: the chmod of an old state file's mode
// goes through a descriptor opened without following a link: a side
// file's name swapped for a link after the checks (by a member of a
// group that may write the directory) is refused, and the link's target,
// another of this user's files, keeps its mode.
func TestCloseToOthersFollowsNoLink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "id_ed25519")
	if err := plant(target, []byte("key"), 0o604); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "state.db-wal")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	err := closeToOthers(link)
	if fi, serr := os.Stat(target); serr != nil || fi.Mode().Perm() != 0o604 {
		t.Fatalf("closeToOthers through a link changed its target: %v %v", fi.Mode().Perm(), serr)
	}
	if !errors.Is(err, ErrStateUnsafe) {
		t.Fatalf("closeToOthers(link) = %v, want ErrStateUnsafe", err)
	}
}
