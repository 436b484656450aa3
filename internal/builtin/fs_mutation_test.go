package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/safefs"
)

// The tests of this file were added by the mutation pass over internal/builtin (docs/security-tests.md, "Twelfth
// pass: the built-ins"): each is red with the bug named in its comment planted.

// mkdirIn is a new directory under base (not the test's temporary directory), removed after the test, with
// symlinks evaluated; the test is skipped when base is missing or resolves beneath avoid.
func mkdirIn(t *testing.T, base, avoid string) string {
	t.Helper()
	if fi, err := os.Lstat(base); err != nil || !fi.IsDir() {
		t.Skipf("%s is not a directory here", base)
	}
	d, err := os.MkdirTemp(base, "maiden-builtin-")
	if err != nil {
		t.Skipf("cannot make a directory in %s: %v", base, err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if d, err = filepath.EvalSymlinks(d); err != nil {
		t.Fatal(err)
	}
	if avoid != "" && (d == avoid || strings.HasPrefix(d, avoid+"/")) {
		t.Skipf("%s resolves beneath %s", base, avoid)
	}
	return d
}

// TestImpliedWriteRootsHoldSymlinks: a workspace-write boundary's write resolves beneath the directory that lets it
// write (the workspace, or /tmp), never beneath "/", which that kind opens for reading only: a symlink in /tmp or in
// the workspace to a directory outside both leads a write nowhere, and nothing is created or changed where it led.
// Red with implied()'s /tmp entry, or its workspace entry, spelt "/" (the write resolved beneath "/": planted
// created outside).
func TestImpliedWriteRootsHoldSymlinks(t *testing.T) {
	// Outside /tmp and outside the workspace: /var/tmp (FHS), where the test may write.
	outside := mkdirIn(t, "/var/tmp", "/tmp")
	ws := mkdirIn(t, "/var/tmp", "/tmp")
	tmp := mkdirIn(t, "/tmp", "")
	if !strings.HasPrefix(tmp, "/tmp/") {
		t.Skipf("/tmp resolves to %s", tmp)
	}
	writeFile(t, outside+"/victim", "ORIGINAL")
	// Relative links (../../var/tmp/…): beneath "/" the kernel would follow them; an absolute one it refuses
	// beneath any root.
	for _, l := range []string{tmp + "/out", ws + "/out"} {
		rel, err := filepath.Rel(filepath.Dir(l), outside)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(rel, l); err != nil {
			t.Fatal(err)
		}
	}
	b := boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.WorkspaceWrite, Workspace: ws}
	for _, p := range []string{tmp + "/out/planted", tmp + "/out/victim", ws + "/out/planted", ws + "/out/victim"} {
		for _, create := range []bool{true, false} {
			_, err := call(t, FSWrite, b, map[string]any{"path": p, "content": "x", "create": create})
			var e *Error
			if !errors.As(err, &e) || (e.Reason != ReasonSymlinkEscape && e.Reason != ReasonSymlink) {
				t.Errorf("write %s (create %v): %v; want symlink_escape (or symlink under the openat walk)", p, create, err)
			}
		}
	}
	if got := readFile(t, outside+"/victim"); got != "ORIGINAL" {
		t.Errorf("the file outside holds %q after writes through links", got)
	}
	if _, err := os.Lstat(outside + "/planted"); !os.IsNotExist(err) {
		t.Errorf("a write through a link created %s/planted: %v", outside, err)
	}
	// Controls: the same boundary writes in both, and reads where the link led (workspace-write reads everywhere).
	for _, p := range []string{tmp + "/f", ws + "/f"} {
		if _, err := call(t, FSWrite, b, map[string]any{"path": p, "content": "ok"}); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
	}
	if out, err := call(t, FSRead, b, map[string]any{"path": outside + "/victim"}); err != nil || out.(*FSReadOutput).Content != "ORIGINAL" {
		t.Fatalf("read %s/victim: %v %v", outside, out, err)
	}
}

// TestCreateFalseTellsNothingBehindARefusedLink: fs_write's existence check (create=false) is asked of the cards as
// the write is, so a link to where they refuse answers no_card whether or not the file is there, never not_found.
// Red with the check's Authorize dropped: "not_found" for the missing targets (TestAllowAsksWhereThePathLed, whose
// target exists, stayed green: the write itself asks the same question).
func TestCreateFalseTellsNothingBehindARefusedLink(t *testing.T) {
	if safefs.Method() != "openat2" {
		t.Skip("the openat walk follows no symlink: every link answers symlink")
	}
	work := tempDir(t)
	writeFile(t, work+"/private/key", "hunter2")
	writeFile(t, work+"/pub/a.txt", "alpha")
	symlinks(t, work, map[string]string{
		"pub/dlink":   "../private",
		"pub/there":   "../private/key",
		"pub/missing": "../private/nope",
	})
	b := restricted([]boundary.Entry{sub(work, boundary.Write)}, nil, nil)
	private := work + "/private"
	allow := func(p string, a boundary.Access) error {
		if p == private || strings.HasPrefix(p, private+"/") {
			return errors.New("no card allows fs:" + string(a) + " " + p)
		}
		return nil
	}
	for _, p := range []string{"pub/dlink/key", "pub/dlink/nope", "pub/dlink/nodir/x", "pub/there", "pub/missing"} {
		_, err := callAllow(t, FSWrite, b, allow, map[string]any{"path": work + "/" + p, "content": "x", "create": false})
		var e *Error
		if !errors.As(err, &e) || e.Reason != ReasonNoCard || !strings.Contains(e.Message, "no card allows fs:write") {
			t.Errorf("create=false %s: %v; want no_card in the cards' words, whatever is behind the link", p, err)
		}
	}
	// Controls: where the cards allow, the filesystem's answer.
	_, err := callAllow(t, FSWrite, b, allow, map[string]any{"path": work + "/pub/gone", "content": "x", "create": false})
	wantError(t, err, ReasonNotFound)
	if _, err := callAllow(t, FSWrite, b, allow, map[string]any{"path": work + "/pub/a.txt", "content": "beta", "create": false}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, private+"/key"); got != "hunter2" {
		t.Errorf("private/key now %q", got)
	}
	for _, p := range []string{private + "/nope", private + "/nodir", work + "/pub/gone"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s was created: %v", p, err)
		}
	}
}

// TestPathLengthAtItsEdge: a path of MaxPathBytes is looked up; one byte more is path_too_long, for every file tool.
// Red with the limit moved by one: a path of 4097 bytes answered "invalid_path" (the boundary's own check, which
// says the path cannot be named) instead of path_too_long.
func TestPathLengthAtItsEdge(t *testing.T) {
	dir := tempDir(t)
	b := restricted([]boundary.Entry{sub(dir, boundary.Write)}, nil, nil)
	p := dir
	for len(p) < MaxPathBytes {
		n := min(200, MaxPathBytes-len(p)-1)
		if n < 1 { // one byte left: lengthen the previous component instead
			p += "a"
			continue
		}
		p += "/" + strings.Repeat("a", n)
	}
	if len(p) != MaxPathBytes {
		t.Fatalf("built a path of %d bytes", len(p))
	}
	for _, fn := range []toolFunc{FSRead, FSList, FSWrite} {
		in := map[string]any{"path": p, "content": "x"}
		if toolName(fn) != ToolFSWrite {
			delete(in, "content")
		}
		_, err := call(t, fn, b, in)
		wantError(t, err, ReasonNotFound)
		in["path"] = p + "b"
		_, err = call(t, fn, b, in)
		wantError(t, err, ReasonPathTooLong)
	}
}

// TestInputCapOnValidJSON: a file tool's input over MaxFSInput is refused by its size, valid JSON or not, before
// anything is touched. Red with decode's size check dropped: the 12 MiB input wrote the file (TestInvalidInput's
// over-cap input, zero bytes, is refused by the parser anyway).
func TestInputCapOnValidJSON(t *testing.T) {
	dir := tempDir(t)
	b := restricted([]boundary.Entry{sub(dir, boundary.Write)}, nil, nil)
	in := []byte(`{"path":"` + dir + `/f","content":"x"}`)
	over := append(in, strings.Repeat(" ", MaxFSInput+1-len(in))...)
	_, err := FSWrite(context.Background(), b, nil, over)
	if e := wantError(t, err, ReasonInvalidInput); !strings.Contains(e.Message, "over the") {
		t.Errorf("%v: want the refusal to name the cap", err)
	}
	if _, err := os.Lstat(dir + "/f"); !os.IsNotExist(err) {
		t.Fatalf("an input over the cap wrote the file: %v", err)
	}
	// At the cap: parsed, and written.
	if _, err := FSWrite(context.Background(), b, nil, over[:MaxFSInput]); err != nil {
		t.Fatalf("an input of exactly MaxFSInput bytes: %v", err)
	}
}

// TestErrorsQuoteUnprintablePaths: a path holding control characters (a terminal escape) is quoted in the error's
// target and text, never echoed raw. Red with shorten's quoting dropped: the ESC and BEL bytes came back raw.
func TestErrorsQuoteUnprintablePaths(t *testing.T) {
	dir := tempDir(t)
	b := restricted([]boundary.Entry{sub(dir, boundary.Write)}, nil, nil)
	p := dir + "/\x1b]0;pwned\x07\x1b[2J"
	for _, fn := range []toolFunc{FSRead, FSList} {
		_, err := call(t, fn, b, map[string]any{"path": p})
		e := wantError(t, err, ReasonNotFound)
		if strings.ContainsAny(e.Target, "\x1b\x07") || strings.ContainsAny(err.Error(), "\x1b\x07") {
			t.Errorf("%s: the error echoes control characters raw: %q", toolName(fn), err.Error())
		}
	}
}
