//go:build unix

package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Pass 38's defect: a state path that is a link to a missing file was let
// through ("a link to nothing: SQLite reports it"), but SQLite follows the
// link and makes the store at its end, in a directory nobody checked and
// with SQLite's own mode (0644 less the umask): whoever could write that
// directory held the store. The missing file is now made as a missing
// path is, mode 0600, after its directory passes the same checks; a link
// into a directory others can write is refused and nothing is made there.
func TestLinkToAMissingStateFile(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	mkdir := func(name string, mode os.FileMode) string {
		t.Helper()
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return d
	}
	open, mine, data := mkdir("open", 0o777), mkdir("mine", 0o700), mkdir("data", 0o700)

	t.Run("into a directory others can write", func(t *testing.T) {
		path := filepath.Join(mine, "state.db")
		if err := os.Symlink(filepath.Join(open, "state.db"), path); err != nil {
			t.Fatal(err)
		}
		s, err := Open(ctx, path, nil)
		if err == nil {
			s.Close()
		}
		_, serr := os.Lstat(filepath.Join(open, "state.db"))
		if !errors.Is(err, ErrStateUnsafe) || !strings.Contains(err.Error(), "writable by other users") || !errors.Is(serr, os.ErrNotExist) {
			t.Fatalf("Open through a link to a missing file in a directory of mode 0777 = %v (the file there: %v); want ErrStateUnsafe, writable by other users, and no file made", err, serr)
		}
	})
	t.Run("into a private directory, through two links", func(t *testing.T) {
		// mine/second.db -> hop (relative) -> data/state.db, missing.
		if err := os.Symlink(filepath.Join(data, "state.db"), filepath.Join(mine, "hop")); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(mine, "second.db")
		if err := os.Symlink("hop", path); err != nil {
			t.Fatal(err)
		}
		s, err := Open(ctx, path, nil)
		if err != nil {
			t.Fatalf("Open through links to a missing file in a private directory: %v", err)
		}
		defer s.Close()
		if err := s.EnsureAgent(ctx, "research"); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(filepath.Join(data, "state.db"))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the store made at the links' end: %v, %v; want a regular file of mode 0600", fi.Mode(), err)
		}
	})
}
