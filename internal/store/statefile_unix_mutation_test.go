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

// TestOpenRefusesStateOthersCanWriteMore: the state file's checks where
// the package's suite left planted bugs green: a state.db that is a link
// into a directory others can write (its side files are made there), a
// -journal others can write, and a file writable by others but not by
// its group (a check of the group's bit instead of the others' one); a
// file its group can write is left to the operator and opens.
func TestOpenRefusesStateOthersCanWriteMore(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, want string
		plant      func(dir, path string) error
	}{
		{"link into an open directory", "has mode 0777, writable by other users", func(dir, path string) error {
			open := filepath.Join(dir, "open")
			if err := os.Mkdir(open, 0o700); err != nil {
				return err
			}
			if err := os.Chmod(open, 0o777); err != nil {
				return err
			}
			if err := plant(filepath.Join(open, "real.db"), nil, 0o600); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(open, "real.db"), path)
		}},
		{"journal", "state.db-journal has mode 0666", func(dir, path string) error {
			if err := plant(path, nil, 0o600); err != nil {
				return err
			}
			return plant(path+"-journal", []byte("planted pages"), 0o666)
		}},
		{"others but not the group", "state.db has mode 0602", func(dir, path string) error {
			return plant(path, nil, 0o602)
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
		})
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	if err := plant(path, nil, 0o660); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("Open of a group-writable state file: %v; want it opened (group write is the operator's choice)", err)
	}
	s.Close()
}
