package toolbuild

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteProjectNeverFollowsOrOverwrites: what NewProject writes are new
// files inside the project's directory. A name already there (a file, or a
// symlink someone planted while the files were being written, leading to a
// file of ours or out of the directory) is refused; the file it leads to
// keeps its content.
func TestWriteProjectNeverFollowsOrOverwrites(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "victim")
	const keep = "the operator's own file\n"
	for _, tt := range []struct {
		name  string
		plant func(t *testing.T, dir string)
		file  string
	}{
		{"symlink to a file outside", func(t *testing.T, dir string) {
			if err := os.Symlink(outside, filepath.Join(dir, "README.md")); err != nil {
				t.Fatal(err)
			}
		}, "README.md"},
		{"symlinked directory leading outside", func(t *testing.T, dir string) {
			if err := os.Symlink(filepath.Dir(outside), filepath.Join(dir, "wit")); err != nil {
				t.Fatal(err)
			}
		}, "wit/victim"},
		{"a file already there", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(keep), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "README.md"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(outside, []byte(keep), 0o600); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			tt.plant(t, dir)
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			files := []projectFile{{"main.js", []byte("x")}, {"README.md", []byte("template\n")}, {"wit/victim", []byte("template\n")}}
			if _, err := writeProject(root, files); err == nil {
				t.Fatalf("wrote the project through %s", tt.file)
			}
			if b, _ := os.ReadFile(outside); string(b) != keep {
				t.Errorf("the file outside became %q", b)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "README.md")); tt.file == "README.md" && len(b) > 0 && string(b) != keep {
				t.Errorf("README.md became %q", b)
			}
		})
	}
}

// TestNewProjectRefusesUnlistableDir: a directory maiden cannot list is not
// taken for an empty one (as another user, a directory of mode 0333 made
// in /tmp hides what it holds). Root lists everything, so this runs as
// another user only.
func TestNewProjectRefusesUnlistableDir(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root lists every directory")
	}
	dir := filepath.Join(t.TempDir(), "greet")
	if err := os.Mkdir(dir, 0o333); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	_, _, err := NewProject(dir, LangJS)
	if !errors.Is(err, ErrProjectExists) || !strings.Contains(err.Error(), "cannot be listed") {
		t.Errorf("NewProject = %v; want ErrProjectExists, cannot be listed", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("wrote into a directory it could not list: %v", entries)
	}
}
