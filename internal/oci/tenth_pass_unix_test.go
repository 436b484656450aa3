//go:build unix

package oci

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreRefusesEverySubdirectoryOthersControl (the tenth pass): each
// of the store's subdirectories is checked, not only the first:
// blobs/sha256, which holds the component files the runtime reads after
// Load, and signatures, which holds the evidence Load verifies again.
// Writable by others, or (as root) owned by another uid, is refused
// naming the directory.
func TestStoreRefusesEverySubdirectoryOthersControl(t *testing.T) {
	for _, c := range []struct {
		sub   string
		chown bool // give it to uid 4242 (root only) rather than chmod 0777
		want  string
	}{
		{filepath.Join("blobs", "sha256"), false, "sha256 is writable by group or others (mode 0777)"},
		{"signatures", false, "signatures is writable by group or others (mode 0777)"},
		{filepath.Join("blobs", "sha256"), true, "sha256 is owned by uid 4242, not by this user"},
		{"signatures", true, "signatures is owned by uid 4242, not by this user"},
	} {
		t.Run(c.sub+map[bool]string{false: " writable by others", true: " owned by another user"}[c.chown], func(t *testing.T) {
			if c.chown && os.Geteuid() != 0 {
				t.Skip("giving a directory to another uid needs root")
			}
			dir := filepath.Join(t.TempDir(), "store")
			if _, err := OpenStore(dir); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, c.sub)
			var err error
			if c.chown {
				err = os.Chown(p, 4242, 4242)
			} else {
				err = os.Chmod(p, 0o777)
			}
			if err != nil {
				t.Fatal(err)
			}
			st, err := OpenStore(dir)
			if err == nil {
				t.Fatalf("OpenStore accepted %s with %s %s", st.Dir(), c.sub, map[bool]string{false: "mode 0777", true: "owned by uid 4242"}[c.chown])
			}
			if !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("OpenStore(%s) = %v\nwant ErrStore naming %q", dir, err, c.want)
			}
		})
	}
}
