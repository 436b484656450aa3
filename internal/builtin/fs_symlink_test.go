package builtin

import (
	"os"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/safefs"
)

// Symlink holes a security review found (review 3): an entry naming a symlink granted its target, and a symlink
// inside a write entry reached a nested protected .git. Each test runs under openat2 (when the kernel has it) and
// under the openat walk, which follows no symlink at all.

// eachMethod runs fn under openat2 (when this kernel has it) and under the openat walk (safefs.ForceWalkForTesting).
func eachMethod(t *testing.T, fn func(t *testing.T, method string)) {
	t.Helper()
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "openat"
		}
		t.Run(name, func(t *testing.T) {
			defer safefs.ForceWalkForTesting(walk)()
			if got := safefs.Method(); got != name {
				if !walk {
					t.Logf("kernel has no openat2 (safefs uses %s): only the walk is tested", got)
					return
				}
				t.Fatalf("safefs.Method() = %q, want %q", got, name)
			}
			fn(t, name)
		})
	}
}

// An exact entry naming a symlink (d/link -> secret, a sibling in the same directory) grants the link's path, not
// the sibling: fs_read refuses it (reason symlink) and never returns the sibling's content; fs_write replaces the
// link itself and leaves the sibling alone. Before the fix the entry's root was d/ and openat2 followed the link,
// since the sibling stays beneath d/.
func TestExactEntryNamingSymlinkToSibling(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		dir := tempDir(t)
		writeFile(t, dir+"/d/f", "f")
		writeFile(t, dir+"/d/secret", "SECRET")
		if err := os.Symlink("secret", dir+"/d/link"); err != nil {
			t.Fatal(err)
		}
		b := restricted([]boundary.Entry{exact(dir+"/d/link", boundary.Read), exact(dir+"/d/f", boundary.Read)}, nil, nil)
		out, err := call(t, FSRead, b, map[string]any{"path": dir + "/d/link"})
		if err == nil {
			t.Fatalf("read %s/d/secret (not in the boundary) through the exact entry d/link: %+v", dir, out)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("error leaks the sibling: %v", err)
		}
		wantError(t, err, ReasonSymlink)
		_, err = call(t, FSList, b, map[string]any{"path": dir + "/d/link"})
		wantError(t, err, ReasonSymlink)
		// Control: the other exact entry, a plain file in the same directory, still reads.
		if out, err := call(t, FSRead, b, map[string]any{"path": dir + "/d/f"}); err != nil || out.(*FSReadOutput).Content != "f" {
			t.Fatalf("read the exact entry d/f: %v %v", out, err)
		}
		// Writing an exact entry that is a symlink replaces the link; the sibling keeps its content.
		bw := restricted([]boundary.Entry{exact(dir+"/d/link", boundary.Write)}, nil, nil)
		if _, err := call(t, FSWrite, bw, map[string]any{"path": dir + "/d/link", "content": "new"}); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, dir+"/d/secret"); got != "SECRET" {
			t.Fatalf("the sibling changed through the exact entry d/link: %q", got)
		}
		if fi, err := os.Lstat(dir + "/d/link"); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("d/link was not replaced by a file: %v %v", fi, err)
		}
	})
}

// An entry naming a symlink to a directory (d/dl -> an absolute path outside, or a relative one) grants neither a
// listing of the target nor, for a subtree entry, anything beneath it. Before the fix the root was opened following
// the link and fs_list listed the outside directory.
func TestEntryNamingDirectorySymlink(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		dir := tempDir(t)
		writeFile(t, dir+"/outside/secret-name", "OUTSIDE")
		writeFile(t, dir+"/d/f", "f")
		if err := os.Symlink(dir+"/outside", dir+"/d/dl"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../outside", dir+"/d/rl"); err != nil {
			t.Fatal(err)
		}
		for _, l := range []string{dir + "/d/dl", dir + "/d/rl"} {
			for _, e := range []boundary.Entry{exact(l, boundary.Read), sub(l, boundary.Write)} {
				b := restricted([]boundary.Entry{e}, nil, nil)
				out, err := call(t, FSList, b, map[string]any{"path": l})
				if err == nil {
					t.Fatalf("listed %s/outside through the %s entry %s: %+v", dir, e.Match, l, out)
				}
				if strings.Contains(err.Error(), "secret-name") {
					t.Fatalf("error leaks the outside listing: %v", err)
				}
				wantError(t, err, ReasonSymlink)
				if e.Match != boundary.Subtree {
					continue
				}
				_, err = call(t, FSRead, b, map[string]any{"path": l + "/secret-name"})
				wantError(t, err, ReasonSymlink)
				_, err = call(t, FSWrite, b, map[string]any{"path": l + "/planted", "content": "x"})
				wantError(t, err, ReasonSymlink)
			}
		}
		if _, err := os.Lstat(dir + "/outside/planted"); !os.IsNotExist(err) {
			t.Fatal("a file was planted outside through a subtree entry naming a symlink")
		}
	})
}

// An entry whose path has a symlink earlier in it (link -> real, entry link/work) is refused with a message saying
// so, rather than granting whatever the link points to now (it may be changed later by whoever owns it).
func TestEntryPathThroughSymlinkRefused(t *testing.T) {
	eachMethod(t, func(t *testing.T, _ string) {
		dir := tempDir(t)
		writeFile(t, dir+"/real/work/f", "f")
		if err := os.Symlink("real", dir+"/link"); err != nil {
			t.Fatal(err)
		}
		b := restricted([]boundary.Entry{sub(dir+"/link/work", boundary.Write)}, nil, nil)
		for _, c := range []struct {
			fn toolFunc
			in map[string]any
		}{
			{FSRead, map[string]any{"path": dir + "/link/work/f"}},
			{FSList, map[string]any{"path": dir + "/link/work"}},
			{FSWrite, map[string]any{"path": dir + "/link/work/new", "content": "x"}},
		} {
			_, err := call(t, c.fn, b, c.in)
			e := wantError(t, err, ReasonSymlink)
			if !strings.Contains(e.Error(), "has a symlink in its path") || !strings.Contains(e.Error(), dir+"/link/work") {
				t.Fatalf("the error does not say the entry's path holds a symlink: %v", e)
			}
		}
		if _, err := os.Lstat(dir + "/real/work/new"); !os.IsNotExist(err) {
			t.Fatal("a file was created through an entry path holding a symlink")
		}
		// Control: the same entry by its real path works.
		br := restricted([]boundary.Entry{sub(dir+"/real/work", boundary.Write)}, nil, nil)
		if out, err := call(t, FSRead, br, map[string]any{"path": dir + "/real/work/f"}); err != nil || out.(*FSReadOutput).Content != "f" {
			t.Fatalf("read through the real path: %v %v", out, err)
		}
	})
}

// A symlink inside a write entry leading into a nested protected directory (ws/g -> sub/.git, ws/h ->
// a/b/.git/hooks) does not make it writable: the write is refused (explicit_deny under openat2, where the link is
// followed and the resolved path checked; symlink under the walk, which follows none) and nothing under .git changes
// or appears. Before the fix only ws/.git and .git beside the file were checked, so ws/g/config was written.
func TestProtectedNameThroughSymlink(t *testing.T) {
	eachMethod(t, func(t *testing.T, method string) {
		dir := tempDir(t)
		ws := dir + "/ws"
		writeFile(t, ws+"/sub/.git/config", "orig")
		writeFile(t, ws+"/a/b/.git/hooks/keep", "keep")
		for link, target := range map[string]string{ws + "/g": "sub/.git", ws + "/h": "a/b/.git/hooks", ws + "/a/up": "../sub/.git"} {
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
		}
		b := restricted([]boundary.Entry{sub(ws, boundary.Write)}, nil, []string{".git"})
		reason := ReasonExplicitDeny
		if method == "openat" {
			reason = ReasonSymlink
		}
		for _, p := range []string{ws + "/g/config", ws + "/g/new", ws + "/h/pre-commit", ws + "/a/up/config"} {
			_, err := call(t, FSWrite, b, map[string]any{"path": p, "content": "[core]\nhooksPath=/tmp/evil"})
			if err == nil {
				t.Fatalf("wrote %s, which resolves under %s/.../.git: %q", p, ws, readFile(t, ws+"/sub/.git/config"))
			}
			if reason == ReasonExplicitDeny {
				wantRefused(t, err, reason)
			} else {
				wantError(t, err, reason)
			}
		}
		if got := readFile(t, ws+"/sub/.git/config"); got != "orig" {
			t.Fatalf("sub/.git/config = %q", got)
		}
		for _, p := range []string{ws + "/sub/.git/new", ws + "/a/b/.git/hooks/pre-commit"} {
			if _, err := os.Lstat(p); !os.IsNotExist(err) {
				t.Fatalf("%s was created", p)
			}
		}
		// Controls: writes elsewhere in the entry work; a name that merely contains .git is not protected; reading
		// through the link is allowed (only writes are protected) where symlinks are followed.
		for _, p := range []string{ws + "/ok", ws + "/sub/x.git"} {
			if _, err := call(t, FSWrite, b, map[string]any{"path": p, "content": "fine"}); err != nil {
				t.Fatalf("write %s: %v", p, err)
			}
		}
		if method == "openat2" {
			if out, err := call(t, FSRead, b, map[string]any{"path": ws + "/g/config"}); err != nil || out.(*FSReadOutput).Content != "orig" {
				t.Fatalf("read through g: %v %v", out, err)
			}
		}
	})
}
