//go:build unix

package oci

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreRefusesDirectoryOthersControl: Load verifies a component's file
// and hands its path to the runtime, which reads it again later, so the
// store must be a directory only this user can change. One owned by
// another user, or under a
// parent another user owns or can write (not sticky), is refused, naming
// it; a sticky parent such as /tmp is fine. Giving a directory to another
// uid needs root: those cases run only as root.
func TestStoreRefusesDirectoryOthersControl(t *testing.T) {
	const other = 4242
	for _, c := range []struct {
		name string
		root bool
		// layout makes the store's surroundings under base and returns
		// the store directory to open.
		layout func(base string) (string, error)
		want   string // "": accepted
	}{
		{"store owned by another user", true, func(base string) (string, error) {
			d := filepath.Join(base, "store")
			if err := os.Mkdir(d, 0o755); err != nil {
				return "", err
			}
			return d, os.Chown(d, other, other)
		}, "store is owned by uid 4242, not by this user"},
		{"blobs owned by another user", true, func(base string) (string, error) {
			d := filepath.Join(base, "store")
			if err := os.MkdirAll(filepath.Join(d, "blobs"), 0o700); err != nil {
				return "", err
			}
			return d, os.Chown(filepath.Join(d, "blobs"), other, other)
		}, "blobs is owned by uid 4242, not by this user"},
		{"parent owned by another user", true, func(base string) (string, error) {
			p := filepath.Join(base, "shared")
			if err := os.Mkdir(p, 0o755); err != nil {
				return "", err
			}
			return filepath.Join(p, "maiden", "oci"), os.Chown(p, other, other)
		}, "shared is owned by uid 4242, neither root nor this user"},
		{"parent writable by others", false, func(base string) (string, error) {
			p := filepath.Join(base, "open")
			if err := os.Mkdir(p, 0o777); err != nil {
				return "", err
			}
			return filepath.Join(p, "oci"), os.Chmod(p, 0o777)
		}, "open is writable by group or others and not sticky (mode 0777)"},
		{"sticky parent", false, func(base string) (string, error) {
			p := filepath.Join(base, "sticky")
			if err := os.Mkdir(p, 0o777); err != nil {
				return "", err
			}
			return filepath.Join(p, "oci"), os.Chmod(p, os.ModeSticky|0o777)
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("giving a directory to another uid needs root")
			}
			dir, err := c.layout(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			st, err := OpenStore(dir)
			if c.want == "" {
				if err != nil {
					t.Fatalf("OpenStore(%s) = %v; want it accepted", dir, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("OpenStore accepted %s (%s): that user can replace a component's file after Load verified it", st.Dir(), c.name)
			}
			if !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("OpenStore(%s) = %v\nwant ErrStore naming %q", dir, err, c.want)
			}
		})
	}
}

// TestDefaultStoreNotShared: with no cache directory known (neither
// $XDG_CACHE_HOME nor $HOME) the default store is not the temporary
// directory's maiden/oci, a name any local user can make first and so keep
// this one from storing or loading an oci:// tool; opening it is refused,
// naming what to set, and nothing is made (an empty path would have been
// the working directory).
func TestDefaultStoreNotShared(t *testing.T) {
	t.Setenv(StoreEnv, "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	dir := DefaultStoreDir()
	if dir != "" {
		t.Fatalf("with no cache directory the store is %q, want none (refused by OpenStore)", dir)
	}
	wd := t.TempDir()
	t.Chdir(wd)
	st, err := OpenStore(dir)
	if st != nil || !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), "set $"+StoreEnv) {
		t.Fatalf("OpenStore(%q) = %v, %v; want ErrStore naming $%s", dir, st, err, StoreEnv)
	}
	if entries, _ := os.ReadDir(wd); len(entries) != 0 {
		t.Errorf("OpenStore(%q) made %d entries in the working directory", dir, len(entries))
	}
}
