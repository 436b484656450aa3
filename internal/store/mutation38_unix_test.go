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

// TestMutation38DirectoryOwnedByAnother: a state file whose directory
// belongs to another user (who could rename the file away and put their
// own in its place, or plant its side files) is refused, whatever the
// directory's mode.
func TestMutation38DirectoryOwnedByAnother(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	dir := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), filepath.Join(dir, "state.db"), nil)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded in a directory owned by uid 4242")
	}
	want := "directory " + dir + " is owned by uid 4242"
	if !errors.Is(err, ErrStateUnsafe) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open: %v\nwant ErrStateUnsafe naming %q", err, want)
	}
	if _, err := os.Lstat(filepath.Join(dir, "state.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused Open left a state file behind: %v", err)
	}
}

// TestMutation38ShmVersion: Generation's reading of the WAL index takes a
// header only when its two copies agree and it is initialised, and its
// value changes with any field of the header, not with iChange alone (a
// recovery may restart that counter); a -shm too short for the two
// copies is never mapped.
func TestMutation38ShmVersion(t *testing.T) {
	t.Parallel()
	hdr := func(change, salt byte) []byte {
		h := make([]byte, walIndexHdrSize)
		h[8], h[12], h[32] = change, 1, salt // iChange, isInit, the first salt
		return h
	}
	both := func(a, b []byte) *shmWatch { return &shmWatch{m: append(append([]byte{}, a...), b...)} }
	if _, ok := both(hdr(5, 1), hdr(6, 1)).version(); ok {
		t.Fatal("version() took a header whose two copies differ (a writer between them)")
	}
	blank := hdr(5, 1)
	blank[12] = 0
	if _, ok := both(blank, blank).version(); ok {
		t.Fatal("version() took a header not initialised (isInit 0)")
	}
	v1, ok1 := both(hdr(5, 1), hdr(5, 1)).version()
	v2, ok2 := both(hdr(5, 2), hdr(5, 2)).version()
	if !ok1 || !ok2 || v1 == v2 {
		t.Fatalf("two headers with the same iChange and other salts: %x, %v and %x, %v; want two versions", v1, ok1, v2, ok2)
	}
	short := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(short+"-shm", make([]byte, walIndexHdrSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openShm(short); err == nil {
		t.Fatalf("openShm over a -shm of %d bytes succeeded; want an error (shorter than the two header copies, %d bytes)", walIndexHdrSize+1, 2*walIndexHdrSize)
	}
}
