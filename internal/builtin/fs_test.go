package builtin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/safefs"
)

// TestSafefsMethod says which resolution the file tools got here: openat2, or the O_NOFOLLOW walk on kernels without
// it (stricter: no symlink is followed at all). The escape tests hold under both.
func TestSafefsMethod(t *testing.T) {
	m := safefs.Method()
	if m != "openat2" && m != "openat" {
		t.Fatalf("safefs.Method() = %q", m)
	}
	t.Logf("safefs resolves with %s", m)
}

func TestReadWriteListInside(t *testing.T) {
	dir := tempDir(t)
	work := filepath.Join(dir, "work")
	writeFile(t, filepath.Join(work, "a.txt"), "hello\n")
	writeFile(t, filepath.Join(work, "bin"), "\x00\xff\x01")
	if err := os.Mkdir(filepath.Join(work, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(work, "ln")); err != nil {
		t.Fatal(err)
	}
	b := restricted([]boundary.Entry{sub(work, boundary.Write)}, nil, nil)

	out, err := call(t, FSRead, b, map[string]any{"path": work + "/a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(*FSReadOutput); r.Content != "hello\n" || r.Encoding != "text" || r.Size != 6 || r.Path != work+"/a.txt" {
		t.Fatalf("read = %+v", r)
	}
	// Binary content comes back as base64, marked, without asking.
	out, err = call(t, FSRead, b, map[string]any{"path": work + "/bin"})
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(*FSReadOutput); r.Encoding != "base64" || r.Content != base64.StdEncoding.EncodeToString([]byte("\x00\xff\x01")) || r.Size != 3 {
		t.Fatalf("binary read = %+v", r)
	}
	// Text asked as base64.
	out, err = call(t, FSRead, b, map[string]any{"path": work + "/a.txt", "encoding": "base64"})
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(*FSReadOutput); r.Encoding != "base64" || r.Content != base64.StdEncoding.EncodeToString([]byte("hello\n")) {
		t.Fatalf("base64 read = %+v", r)
	}

	// Write text, then binary; both read back exactly.
	out, err = call(t, FSWrite, b, map[string]any{"path": work + "/new.txt", "content": "héllo"})
	if err != nil {
		t.Fatal(err)
	}
	if w := out.(*FSWriteOutput); w.Bytes != int64(len("héllo")) || w.Path != work+"/new.txt" {
		t.Fatalf("write = %+v", w)
	}
	if got := readFile(t, work+"/new.txt"); got != "héllo" {
		t.Fatalf("file holds %q", got)
	}
	if _, err := call(t, FSWrite, b, map[string]any{"path": work + "/new.bin", "content": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}), "encoding": "base64"}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, work+"/new.bin"); got != "\x00\x01\x02\xff" {
		t.Fatalf("binary file holds %q", got)
	}
	// create=false: an existing file is replaced; a missing one is not created.
	if _, err := call(t, FSWrite, b, map[string]any{"path": work + "/a.txt", "content": "bye", "create": false}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, work+"/a.txt"); got != "bye" {
		t.Fatalf("a.txt holds %q", got)
	}
	_, err = call(t, FSWrite, b, map[string]any{"path": work + "/missing.txt", "content": "x", "create": false})
	wantError(t, err, ReasonNotFound)
	if _, serr := os.Lstat(work + "/missing.txt"); !os.IsNotExist(serr) {
		t.Fatalf("create=false created the file: %v", serr)
	}
	// An empty content is a valid, empty file.
	if _, err := call(t, FSWrite, b, map[string]any{"path": work + "/empty", "content": ""}); err != nil {
		t.Fatal(err)
	}

	out, err = call(t, FSList, b, map[string]any{"path": work})
	if err != nil {
		t.Fatal(err)
	}
	l := out.(*FSListOutput)
	got := map[string]string{}
	for _, e := range l.Entries {
		got[e.Name] = e.Type
	}
	want := map[string]string{"a.txt": "file", "bin": "file", "sub": "dir", "ln": "symlink", "new.txt": "file", "new.bin": "file", "empty": "file"}
	if len(got) != len(want) || l.Truncated {
		t.Fatalf("list = %+v, want %v", l, want)
	}
	for n, ty := range want {
		if got[n] != ty {
			t.Errorf("entry %s: type %q, want %q", n, got[n], ty)
		}
	}
	// No temporary file of the atomic writes is left behind.
	for n := range got {
		if strings.HasSuffix(n, ".tmp") {
			t.Errorf("temporary file %s left", n)
		}
	}
}

func TestErrorsNamePathAndCause(t *testing.T) {
	dir := tempDir(t)
	writeFile(t, dir+"/f", "x")
	if err := os.Mkdir(dir+"/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(dir+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("a", MaxReadBytes+1)
	writeFile(t, dir+"/big", big)
	writeFile(t, dir+"/cap", big[:MaxReadBytes])
	b := restricted([]boundary.Entry{sub(dir, boundary.Write)}, nil, nil)

	cases := []struct {
		fn     toolFunc
		in     any
		reason string
	}{
		{FSRead, map[string]any{"path": dir + "/nope"}, ReasonNotFound},
		{FSRead, map[string]any{"path": dir + "/d"}, ReasonIsDirectory},
		{FSRead, map[string]any{"path": dir + "/fifo"}, ReasonNotRegular},
		{FSRead, map[string]any{"path": dir + "/big"}, ReasonTooLarge},
		{FSRead, map[string]any{"path": dir + "/f/x"}, ReasonNotDirectory},
		{FSList, map[string]any{"path": dir + "/f"}, ReasonNotDirectory},
		{FSList, map[string]any{"path": dir + "/nope"}, ReasonNotFound},
		{FSWrite, map[string]any{"path": dir + "/nodir/f", "content": "x"}, ReasonNotFound},
		{FSWrite, map[string]any{"path": dir + "/d", "content": "x"}, ReasonIsDirectory},
		{FSWrite, map[string]any{"path": dir + "/fifo", "content": "x"}, ReasonNotRegular},
		{FSWrite, map[string]any{"path": dir + "/w", "content": big}, ReasonTooLarge},
		{FSWrite, map[string]any{"path": dir + "/w", "content": base64.StdEncoding.EncodeToString([]byte(big)), "encoding": "base64"}, ReasonTooLarge},
	}
	for _, c := range cases {
		_, err := call(t, c.fn, b, c.in)
		e := wantError(t, err, c.reason)
		p := c.in.(map[string]any)["path"].(string)
		if e.Target != p || !strings.Contains(err.Error(), p) {
			t.Errorf("%v: does not name the path %s", err, p)
		}
	}
	// Exactly at the caps passes.
	if out, err := call(t, FSRead, b, map[string]any{"path": dir + "/cap"}); err != nil || out.(*FSReadOutput).Size != MaxReadBytes {
		t.Fatalf("read at the cap: %v", err)
	}
	if _, err := call(t, FSWrite, b, map[string]any{"path": dir + "/w", "content": big[:MaxWriteBytes]}); err != nil {
		t.Fatalf("write at the cap: %v", err)
	}
	if _, err := os.Lstat(dir + "/nodir"); !os.IsNotExist(err) {
		t.Fatal("fs_write created a directory")
	}
}

func TestInvalidInput(t *testing.T) {
	dir := tempDir(t)
	b := restricted([]boundary.Entry{sub(dir, boundary.Write)}, nil, nil)
	p := dir + "/f"
	cases := []struct {
		name string
		fn   toolFunc
		in   string
	}{
		{"unknown key", FSRead, `{"path":"` + p + `","follow":true}`},
		{"trailing data", FSRead, `{"path":"` + p + `"} {}`},
		{"not an object", FSRead, `"` + p + `"`},
		{"no path", FSRead, `{}`},
		{"bad encoding", FSRead, `{"path":"` + p + `","encoding":"hex"}`},
		{"no content", FSWrite, `{"path":"` + p + `"}`},
		{"bad base64", FSWrite, `{"path":"` + p + `","content":"***","encoding":"base64"}`},
		{"unpadded base64", FSWrite, `{"path":"` + p + `","content":"YQ","encoding":"base64"}`},
		{"bad write encoding", FSWrite, `{"path":"` + p + `","content":"x","encoding":"utf16"}`},
		{"list unknown key", FSList, `{"path":"` + dir + `","recursive":true}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := call(t, c.fn, b, []byte(c.in))
			wantError(t, err, ReasonInvalidInput)
		})
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatal("an invalid write created the file")
	}
	// Over the input cap, before parsing.
	_, err := FSRead(context.Background(), b, nil, make([]byte, MaxFSInput+1))
	wantError(t, err, ReasonInvalidInput)
}

// Outside the boundary: the structured error with the minimal expansion, which, once approved, makes the same
// call pass.
func TestOutsideRequiresExpansion(t *testing.T) {
	dir := tempDir(t)
	work, other := dir+"/work", dir+"/other"
	writeFile(t, work+"/r.txt", "read only")
	writeFile(t, other+"/o.txt", "other")
	b := restricted([]boundary.Entry{sub(work, boundary.Read)}, nil, nil)

	cases := []struct {
		fn    toolFunc
		stage string
		in    map[string]any
		need  boundary.Entry
	}{
		{FSRead, "fs_read", map[string]any{"path": other + "/o.txt"}, exact(other+"/o.txt", boundary.Read)},
		{FSList, "fs_list", map[string]any{"path": other}, exact(other, boundary.Read)},
		{FSWrite, "fs_write", map[string]any{"path": work + "/r.txt", "content": "changed"}, exact(work+"/r.txt", boundary.Write)},
		{FSWrite, "fs_write", map[string]any{"path": other + "/new", "content": "x"}, exact(other+"/new", boundary.Write)},
	}
	for _, c := range cases {
		_, err := call(t, c.fn, b, c.in)
		ce := wantRequired(t, err, boundary.DomainFilesystem, c.stage, boundary.Expansion{Entries: []boundary.Entry{c.need}})
		if verr := ce.Validate(); verr != nil {
			t.Fatalf("%v: %v", ce, verr)
		}
		if c.in["path"] == work+"/r.txt" {
			if got := readFile(t, work+"/r.txt"); got != "read only" {
				t.Fatalf("the read-only file was written by a refused call: %q", got)
			}
		}
		raw, _ := json.Marshal(ce)
		if !strings.Contains(string(raw), `"reason":"sandbox_boundary_required"`) || !strings.Contains(string(raw), `"requiredExpansion":{"filesystem":{"entries":[{"path":`) {
			t.Fatalf("structuredContent = %s", raw)
		}
		// The model sends requiredExpansion back unchanged; a human approves; the retried call passes.
		xraw, _ := json.Marshal(ce.RequiredExpansion)
		x, verr := boundary.Validate(xraw)
		if verr != nil {
			t.Fatal(verr)
		}
		a := boundary.Assess(b, x)
		if a.Status != boundary.Approved {
			t.Fatalf("assess = %+v", a)
		}
		if _, err := call(t, c.fn, a.Boundary, c.in); err != nil {
			t.Fatalf("after approving %s: %v", xraw, err)
		}
	}
	if got := readFile(t, work+"/r.txt"); got != "changed" {
		t.Fatalf("r.txt after the approved write = %q", got)
	}
	if got := readFile(t, other+"/new"); got != "x" {
		t.Fatalf("other/new = %q", got)
	}
}

func TestDenyAndProtected(t *testing.T) {
	dir := tempDir(t)
	work := dir + "/work"
	writeFile(t, work+"/secrets/key", "KEY")
	writeFile(t, work+"/.git/config", "[core]")
	writeFile(t, work+"/sub/.git/HEAD", "ref")
	if err := os.Symlink("secrets", work+"/ln"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".git", work+"/g"); err != nil {
		t.Fatal(err)
	}
	b := restricted([]boundary.Entry{sub(work, boundary.Write)}, []string{work + "/secrets"}, []string{".git"})

	for _, c := range []struct {
		fn toolFunc
		in map[string]any
	}{
		{FSRead, map[string]any{"path": work + "/secrets/key"}},
		{FSList, map[string]any{"path": work + "/secrets"}},
		{FSWrite, map[string]any{"path": work + "/secrets/planted", "content": "x"}},
		{FSWrite, map[string]any{"path": work + "/.git/config", "content": "x"}},
		{FSWrite, map[string]any{"path": work + "/sub/.git/HEAD", "content": "x"}},
		{FSWrite, map[string]any{"path": work + "/.git/hooks-new", "content": "x"}},
		// Through a symlink inside the boundary: the path given is clean, where it resolves is not.
		{FSRead, map[string]any{"path": work + "/ln/key"}},
		{FSList, map[string]any{"path": work + "/ln"}},
		{FSWrite, map[string]any{"path": work + "/ln/planted", "content": "x"}},
		{FSWrite, map[string]any{"path": work + "/g/config", "content": "x"}},
	} {
		_, err := call(t, c.fn, b, c.in)
		ce := wantRefused(t, err, ReasonExplicitDeny)
		if strings.Contains(ce.Message, "KEY") {
			t.Fatalf("message leaks content: %s", ce.Message)
		}
	}
	if got := readFile(t, work+"/.git/config"); got != "[core]" {
		t.Fatalf(".git/config = %q", got)
	}
	if got := readFile(t, work+"/sub/.git/HEAD"); got != "ref" {
		t.Fatalf("sub/.git/HEAD = %q", got)
	}
	for _, p := range []string{work + "/secrets/planted", work + "/.git/hooks-new"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("%s was created", p)
		}
	}
	// Reading under a protected name is allowed.
	if out, err := call(t, FSRead, b, map[string]any{"path": work + "/.git/config"}); err != nil || out.(*FSReadOutput).Content != "[core]" {
		t.Fatalf("read .git/config: %v", err)
	}
	// An expansion can never cover the deny (the boundary package refuses it), so the error never offers one.
	_, err := call(t, FSRead, b, map[string]any{"path": work + "/secrets"})
	wantRefused(t, err, ReasonExplicitDeny)
}

// Every way out of the boundary through the path itself is refused, and nothing outside is read or written.
func TestEscapes(t *testing.T) {
	dir := tempDir(t)
	work, outside := dir+"/work", dir+"/outside"
	writeFile(t, outside+"/secret", "OUTSIDE")
	writeFile(t, work+"/ok", "ok")
	for link, target := range map[string]string{
		"abs-file": outside + "/secret",
		"abs-dir":  outside,
		"rel-file": "../outside/secret",
		"rel-dir":  "../outside",
		"proc":     "/proc/self/root" + outside + "/secret",
	} {
		if err := os.Symlink(target, work+"/"+link); err != nil {
			t.Fatal(err)
		}
	}
	b := restricted([]boundary.Entry{sub(work, boundary.Write)}, nil, nil)

	// "..", ".", "//", trailing "/" and NUL: refused as given, never cleaned.
	for _, p := range []string{
		work + "/../outside/secret", work + "/./ok", work + "//ok", work + "/", work + "/ok\x00", "\x00" + work,
		work + "/..", "/../" + outside[1:] + "/secret",
	} {
		for _, fn := range []toolFunc{FSRead, FSList} {
			_, err := call(t, fn, b, map[string]any{"path": p})
			wantError(t, err, ReasonInvalidPath)
		}
		_, err := call(t, FSWrite, b, map[string]any{"path": p, "content": "x"})
		wantError(t, err, ReasonInvalidPath)
	}
	// Symlinks inside the boundary that point out.
	for _, p := range []string{work + "/abs-file", work + "/rel-file", work + "/abs-dir/secret", work + "/rel-dir/secret", work + "/proc"} {
		out, err := call(t, FSRead, b, map[string]any{"path": p})
		if err == nil {
			t.Fatalf("read %s = %+v, want a refusal", p, out)
		}
		if strings.Contains(err.Error(), "OUTSIDE") {
			t.Fatal(err)
		}
		var e *Error
		if !asError(err, &e) || (e.Reason != ReasonSymlinkEscape && e.Reason != ReasonSymlink) {
			t.Fatalf("read %s: %v, want symlink_escape or symlink", p, err)
		}
	}
	for _, p := range []string{work + "/abs-dir", work + "/rel-dir"} {
		if _, err := call(t, FSList, b, map[string]any{"path": p}); err == nil {
			t.Fatalf("list %s passed", p)
		}
	}
	for _, p := range []string{work + "/abs-dir/planted", work + "/rel-dir/planted"} {
		if _, err := call(t, FSWrite, b, map[string]any{"path": p, "content": "x"}); err == nil {
			t.Fatalf("write %s passed", p)
		}
	}
	// Writing to a symlink that points out replaces the link inside the boundary; the target is untouched.
	for _, p := range []string{work + "/abs-file", work + "/rel-file"} {
		if _, err := call(t, FSWrite, b, map[string]any{"path": p, "content": "replaced"}); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s is not a regular file after the write: %v", p, err)
		}
	}
	if got := readFile(t, outside+"/secret"); got != "OUTSIDE" {
		t.Fatalf("outside file changed to %q", got)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatalf("something was planted outside: %v", ents)
	}
}

func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

// Case tricks on a case-sensitive filesystem: /X/WORK is not /X/work, for the boundary nor for the kernel.
func TestCaseTricks(t *testing.T) {
	dir := tempDir(t)
	work := dir + "/work"
	writeFile(t, work+"/f", "inside")
	writeFile(t, dir+"/WORK/f", "other directory")
	writeFile(t, work+"/secrets/k", "KEY")
	b := restricted([]boundary.Entry{sub(work, boundary.Read)}, []string{work + "/secrets"}, []string{".git"})

	_, err := call(t, FSRead, b, map[string]any{"path": dir + "/WORK/f"})
	wantRequired(t, err, boundary.DomainFilesystem, ToolFSRead, boundary.Expansion{Entries: []boundary.Entry{exact(dir+"/WORK/f", boundary.Read)}})
	_, err = call(t, FSRead, b, map[string]any{"path": work + "/F"})
	wantError(t, err, ReasonNotFound)
	// A differently cased deny path names another (missing) directory: not found, never the denied key.
	for _, p := range []string{work + "/SECRETS/k", work + "/Secrets/k"} {
		_, err := call(t, FSRead, b, map[string]any{"path": p})
		wantError(t, err, ReasonNotFound)
	}
	// Protected names are matched exactly too, and .GIT is another name: a write there needs an expansion like
	// any path (and the entry here is read-only).
	b.Entries = []boundary.Entry{sub(work, boundary.Write)}
	if err := os.Mkdir(work+"/.GIT", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, FSWrite, b, map[string]any{"path": work + "/.GIT/x", "content": "x"}); err != nil {
		t.Fatalf("write .GIT/x: %v", err)
	}
	_, err = call(t, FSWrite, b, map[string]any{"path": work + "/.git/x", "content": "x"})
	wantRefused(t, err, ReasonExplicitDeny)
}

func TestLongPaths(t *testing.T) {
	dir := tempDir(t)
	b := restricted([]boundary.Entry{sub(dir, boundary.Write)}, nil, nil)
	long := dir + "/" + strings.Repeat("a", MaxPathBytes)
	for _, fn := range []toolFunc{FSRead, FSList} {
		_, err := call(t, fn, b, map[string]any{"path": long})
		e := wantError(t, err, ReasonPathTooLong)
		if len(e.Error()) > 1024 {
			t.Fatalf("the error quotes the whole path: %d bytes", len(e.Error()))
		}
	}
	_, err := call(t, FSWrite, b, map[string]any{"path": long, "content": "x"})
	wantError(t, err, ReasonPathTooLong)

	// A deep path just under the limit works: ~2000 components.
	deep := dir
	for len(deep)+len("/d/f") < MaxPathBytes-8 {
		deep += "/d"
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	f := deep + "/f"
	if len(f) > MaxPathBytes || len(f) < MaxPathBytes-16 {
		t.Fatalf("deep path is %d bytes", len(f))
	}
	if _, err := call(t, FSWrite, b, map[string]any{"path": f, "content": "deep"}); err != nil {
		t.Fatal(err)
	}
	out, err := call(t, FSRead, b, map[string]any{"path": f})
	if err != nil || out.(*FSReadOutput).Content != "deep" {
		t.Fatalf("read deep: %v %v", out, err)
	}
	out, err = call(t, FSList, b, map[string]any{"path": deep})
	if err != nil || len(out.(*FSListOutput).Entries) != 1 {
		t.Fatalf("list deep: %v %v", out, err)
	}
}

// Hard links: a link inside the boundary to a file outside (same filesystem) is read like any file, because path
// resolution cannot see where else an inode is linked; a write replaces the name (safefs.WriteAtomic), so the
// outside file never changes.
func TestHardLinks(t *testing.T) {
	dir := tempDir(t)
	work, outside := dir+"/work", dir+"/outside"
	writeFile(t, outside+"/secret", "OUTSIDE")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside+"/secret", work+"/hard"); err != nil {
		t.Fatalf("cannot make a hard link in a temporary directory: %v", err)
	}
	b := restricted([]boundary.Entry{sub(work, boundary.Write)}, nil, nil)
	out, err := call(t, FSRead, b, map[string]any{"path": work + "/hard"})
	if err != nil || out.(*FSReadOutput).Content != "OUTSIDE" {
		t.Fatalf("read through the hard link: %v %v (documented: it is read)", out, err)
	}
	if _, err := call(t, FSWrite, b, map[string]any{"path": work + "/hard", "content": "mine"}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, outside+"/secret"); got != "OUTSIDE" {
		t.Fatalf("the outside file changed through its hard link: %q", got)
	}
	if got := readFile(t, work+"/hard"); got != "mine" {
		t.Fatalf("work/hard = %q", got)
	}
}

// An exact entry allows that path only: not its siblings, not the directory.
func TestExactEntries(t *testing.T) {
	dir := tempDir(t)
	writeFile(t, dir+"/d/f", "f")
	writeFile(t, dir+"/d/g", "g")
	writeFile(t, dir+"/outside", "OUTSIDE")
	if err := os.Symlink("../outside", dir+"/d/esc"); err != nil {
		t.Fatal(err)
	}
	b := restricted([]boundary.Entry{exact(dir+"/d/f", boundary.Read), exact(dir+"/d/new", boundary.Write), exact(dir+"/d/esc", boundary.Read)}, nil, nil)
	if out, err := call(t, FSRead, b, map[string]any{"path": dir + "/d/f"}); err != nil || out.(*FSReadOutput).Content != "f" {
		t.Fatalf("read exact: %v %v", out, err)
	}
	_, err := call(t, FSRead, b, map[string]any{"path": dir + "/d/g"})
	wantRequired(t, err, boundary.DomainFilesystem, ToolFSRead, boundary.Expansion{Entries: []boundary.Entry{exact(dir+"/d/g", boundary.Read)}})
	_, err = call(t, FSList, b, map[string]any{"path": dir + "/d"})
	wantRequired(t, err, boundary.DomainFilesystem, ToolFSList, boundary.Expansion{Entries: []boundary.Entry{exact(dir+"/d", boundary.Read)}})
	_, err = call(t, FSWrite, b, map[string]any{"path": dir + "/d/f", "content": "x"})
	wantRequired(t, err, boundary.DomainFilesystem, ToolFSWrite, boundary.Expansion{Entries: []boundary.Entry{exact(dir+"/d/f", boundary.Write)}})
	if _, err := call(t, FSWrite, b, map[string]any{"path": dir + "/d/new", "content": "n"}); err != nil {
		t.Fatal(err)
	}
	// An entry naming the file or directory the call is about, whatever its match.
	b2 := restricted([]boundary.Entry{sub(dir+"/d/f", boundary.Write), exact(dir+"/d", boundary.Read), sub(dir+"/d/created", boundary.Write)}, nil, nil)
	if out, err := call(t, FSRead, b2, map[string]any{"path": dir + "/d/f"}); err != nil || out.(*FSReadOutput).Content != "f" {
		t.Fatalf("read a file named by a subtree entry: %v %v", out, err)
	}
	if _, err := call(t, FSWrite, b2, map[string]any{"path": dir + "/d/created", "content": "c"}); err != nil {
		t.Fatalf("create a file named by a subtree entry: %v", err)
	}
	if out, err := call(t, FSList, b2, map[string]any{"path": dir + "/d"}); err != nil || len(out.(*FSListOutput).Entries) < 3 {
		t.Fatalf("list a directory named by an exact entry: %v %v", out, err)
	}
	// An exact entry naming a symlink that leaves its directory is not a way out.
	if _, err := call(t, FSRead, b, map[string]any{"path": dir + "/d/esc"}); err == nil || strings.Contains(err.Error(), "OUTSIDE") {
		t.Fatalf("read through an exact symlink entry: %v", err)
	}
}

// Relative paths are relative to the workspace of a workspace-write boundary, and refused without one.
func TestWorkspaceRelativePaths(t *testing.T) {
	dir := tempDir(t)
	ws := dir + "/ws"
	writeFile(t, ws+"/src/main.go", "package main")
	b := boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.WorkspaceWrite, Workspace: ws, Deny: []string{ws + "/secrets"}, Protected: []string{".git"}}
	out, err := call(t, FSRead, b, map[string]any{"path": "src/main.go"})
	if err != nil || out.(*FSReadOutput).Path != ws+"/src/main.go" {
		t.Fatalf("relative read: %v %v", out, err)
	}
	if _, err := call(t, FSWrite, b, map[string]any{"path": "src/new.go", "content": "package main"}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, ws+"/src/new.go"); got != "package main" {
		t.Fatalf("new.go = %q", got)
	}
	for _, p := range []string{"../x", "..", ".", "src/../../x", "./src/main.go", "src//main.go", "src/"} {
		_, err := call(t, FSRead, b, map[string]any{"path": p})
		wantError(t, err, ReasonInvalidPath)
	}
	_, err = call(t, FSWrite, b, map[string]any{"path": ".git/config", "content": "x"})
	wantRefused(t, err, ReasonExplicitDeny)
	// workspace-write reads everywhere but writes only in the workspace and /tmp.
	writeFile(t, dir+"/elsewhere", "e")
	if _, err := call(t, FSRead, b, map[string]any{"path": dir + "/elsewhere"}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, "/tmp/") {
		_, err = call(t, FSWrite, b, map[string]any{"path": dir + "/elsewhere", "content": "x"})
		wantRequired(t, err, boundary.DomainFilesystem, ToolFSWrite, boundary.Expansion{Entries: []boundary.Entry{exact(dir+"/elsewhere", boundary.Write)}})
	}
	// Without a workspace a relative path is refused.
	_, err = call(t, FSRead, restricted([]boundary.Entry{sub(ws, boundary.Read)}, nil, nil), map[string]any{"path": "src/main.go"})
	wantError(t, err, ReasonInvalidPath)
}

func TestBoundaryKinds(t *testing.T) {
	dir := tempDir(t)
	writeFile(t, dir+"/f", "f")
	out, err := call(t, FSRead, boundary.Boundary{Kind: boundary.Bypass, Filesystem: boundary.Restricted}, map[string]any{"path": dir + "/f"})
	if err != nil || out.(*FSReadOutput).Content != "f" {
		t.Fatalf("bypass read: %v %v", out, err)
	}
	_, err = call(t, FSRead, boundary.Boundary{Kind: boundary.External, Filesystem: boundary.Unrestricted}, map[string]any{"path": dir + "/f"})
	wantRefused(t, err, ReasonNotManaged)
	// An empty restricted boundary allows nothing, and says what to ask for.
	_, err = call(t, FSList, restricted(nil, nil, nil), map[string]any{"path": dir})
	wantRequired(t, err, boundary.DomainFilesystem, ToolFSList, boundary.Expansion{Entries: []boundary.Entry{exact(dir, boundary.Read)}})
}

func TestListCap(t *testing.T) {
	dir := tempDir(t)
	for i := range MaxListEntries + 5 {
		f, err := os.Create(filepath.Join(dir, "f"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	b := restricted([]boundary.Entry{sub(dir, boundary.Read)}, nil, nil)
	out, err := call(t, FSList, b, map[string]any{"path": dir})
	if err != nil {
		t.Fatal(err)
	}
	if l := out.(*FSListOutput); len(l.Entries) != MaxListEntries || !l.Truncated {
		t.Fatalf("%d entries, truncated %v", len(l.Entries), l.Truncated)
	}
}

func TestCanceledContext(t *testing.T) {
	dir := tempDir(t)
	b := restricted([]boundary.Entry{sub(dir, boundary.Write)}, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := FSWrite(ctx, b, nil, []byte(`{"path":"`+dir+`/f","content":"x"}`))
	wantError(t, err, ReasonIO)
	if _, serr := os.Lstat(dir + "/f"); !os.IsNotExist(serr) {
		t.Fatal("a canceled write wrote")
	}
}
