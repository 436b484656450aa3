package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/safefs"
)

// reasonOf is the reason of a file tool's refusal: a structured boundary error's (explicit_deny) or the tool's own
// (not_found, no_card, ...); "" for success or anything else.
func reasonOf(err error) string {
	var ce *boundary.CommandError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// symlinks makes each link (relative to dir) pointing at its target.
func symlinks(t *testing.T, dir string, links map[string]string) {
	t.Helper()
	for link, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNoExistenceOracleThroughDeny: a link beneath a writable entry that leads beneath the boundary's explicit deny
// answers explicit_deny whether or not something is there, as the same path named directly is refused before anything
// is looked up. Before the fix a missing target answered not_found (or not_directory) and an existing one
// explicit_deny: an agent able to make a link (a CLI, a tool with a writable preopen) learnt what exists under a
// directory no expansion lets it read. The same for a write through a link to a missing place under a protected name.
// With and without cards (the deny check does not depend on them).
func TestNoExistenceOracleThroughDeny(t *testing.T) {
	if safefs.Method() != "openat2" {
		t.Skip("the openat walk follows no symlink: every link answers symlink, whatever is behind it")
	}
	work := tempDir(t)
	writeFile(t, work+"/private/key", "hunter2")
	if err := os.MkdirAll(work+"/private/dir", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, work+"/pub/a.txt", "alpha")
	writeFile(t, work+"/repo/.git/hooks/pre-commit", "#!/bin/sh")
	symlinks(t, work, map[string]string{
		"pub/there":   "../private/key",       // exists
		"pub/missing": "../private/nope",      // does not
		"pub/deeper":  "../private/nope/x",    // a missing directory on the way
		"pub/notdir":  "../private/key/x",     // a file where a directory would be
		"pub/dthere":  "../private/dir",       // a directory, for fs_list and fs_write's parent
		"pub/dnone":   "../private/nodir",     // no such directory
		"pub/chain":   "missing",              // a link to the dangling link
		"pub/gthere":  "../repo/.git/hooks",   // a protected directory that exists
		"pub/gnone":   "../repo/.git/nohooks", // one that does not
		"pub/ok":      "a.txt",                // control: allowed, exists
		"pub/okgone":  "gone.txt",             // control: allowed, missing
	})
	b := restricted([]boundary.Entry{sub(work, boundary.Write)}, []string{work + "/private"}, []string{".git"})
	cases := []struct {
		fn     toolFunc
		in     map[string]any
		reason string
	}{
		{FSRead, map[string]any{"path": work + "/pub/there"}, ReasonExplicitDeny},
		{FSRead, map[string]any{"path": work + "/pub/missing"}, ReasonExplicitDeny},
		{FSRead, map[string]any{"path": work + "/pub/deeper"}, ReasonExplicitDeny},
		{FSRead, map[string]any{"path": work + "/pub/notdir"}, ReasonExplicitDeny},
		{FSRead, map[string]any{"path": work + "/pub/chain"}, ReasonExplicitDeny},
		{FSList, map[string]any{"path": work + "/pub/dthere"}, ReasonExplicitDeny},
		{FSList, map[string]any{"path": work + "/pub/dnone"}, ReasonExplicitDeny},
		{FSList, map[string]any{"path": work + "/pub/there"}, ReasonExplicitDeny}, // a file, not a directory
		{FSWrite, map[string]any{"path": work + "/pub/dthere/new", "content": "x"}, ReasonExplicitDeny},
		{FSWrite, map[string]any{"path": work + "/pub/dnone/new", "content": "x"}, ReasonExplicitDeny},
		{FSWrite, map[string]any{"path": work + "/pub/there/new", "content": "x"}, ReasonExplicitDeny}, // a file as the parent
		{FSWrite, map[string]any{"path": work + "/pub/missing", "content": "x", "create": false}, ReasonExplicitDeny},
		{FSWrite, map[string]any{"path": work + "/pub/gthere/new", "content": "x"}, ReasonExplicitDeny},
		{FSWrite, map[string]any{"path": work + "/pub/gnone/new", "content": "x"}, ReasonExplicitDeny},
		// Controls: where nothing forbids it, the filesystem's own answers stay.
		{FSRead, map[string]any{"path": work + "/pub/okgone"}, ReasonNotFound},
		{FSRead, map[string]any{"path": work + "/pub/nothing"}, ReasonNotFound},
		{FSWrite, map[string]any{"path": work + "/pub/nodir/new", "content": "x"}, ReasonNotFound},
		{FSList, map[string]any{"path": work + "/pub/a.txt"}, ReasonNotDirectory},
	}
	for _, cards := range []struct {
		name  string
		allow Allow
	}{{"no cards", nil}, {"cards allow all", func(string, boundary.Access) error { return nil }}} {
		t.Run(cards.name, func(t *testing.T) {
			for _, tc := range cases {
				_, err := callAllow(t, tc.fn, b, cards.allow, tc.in)
				if got := reasonOf(err); got != tc.reason {
					t.Errorf("%s %v: %v, want reason %s", toolName(tc.fn), tc.in["path"], err, tc.reason)
				}
				if err != nil && strings.Contains(err.Error(), work+"/private") {
					t.Errorf("%s %v: the refusal names where it led: %v", toolName(tc.fn), tc.in["path"], err)
				}
			}
			if out, err := callAllow(t, FSRead, b, cards.allow, map[string]any{"path": work + "/pub/ok"}); err != nil || out.(*FSReadOutput).Content != "alpha" {
				t.Errorf("read through an allowed link: %v %v", out, err)
			}
		})
	}
	for _, p := range []string{work + "/private/new", work + "/private/nodir", work + "/private/dir/new", work + "/repo/.git/hooks/new"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s was created: %v", p, err)
		}
	}
}

// TestNoExistenceOracleThroughDetour: a link whose target passes through a directory the agent may not read and
// comes back out ("../private/x/../../pub/a.txt") answers the same whatever private/x is: a directory, nothing, a
// file, a link leading out or a link to a sibling. Refused with the same reason and the same words: explicit_deny
// when it is beneath the boundary's deny, no_card (the cards' words about the place the link text names) when the
// cards refuse it. Before the fix the detour through an existing directory read pub/a.txt (and fs_write wrote
// through it), while a missing one answered not_found and a file not_directory: the answer told what the forbidden
// directory holds. A detour through a place the agent may read stays allowed, and a link that only goes down into a
// refused directory is asked about where it ends, as before.
func TestNoExistenceOracleThroughDetour(t *testing.T) {
	if safefs.Method() != "openat2" {
		t.Skip("the openat walk follows no symlink and no \"..\": every such link answers symlink")
	}
	work := tempDir(t)
	writeFile(t, work+"/pub/a.txt", "alpha")
	writeFile(t, work+"/pub/sub/f", "f")
	if err := os.MkdirAll(work+"/pub/dir", 0o755); err != nil {
		t.Fatal(err)
	}
	// The states of AREA/x the answers must not tell apart.
	states := map[string]func(area string){
		"dir": func(area string) {
			if err := os.MkdirAll(area+"/x/y", 0o755); err != nil {
				t.Fatal(err)
			}
		},
		"missing": func(area string) {},
		"file":    func(area string) { writeFile(t, area+"/x", "secret") },
		"link out": func(area string) {
			symlinks(t, area, map[string]string{"x": "../pub"})
		},
		"link in": func(area string) {
			if err := os.MkdirAll(area+"/sub/y", 0o755); err != nil {
				t.Fatal(err)
			}
			symlinks(t, area, map[string]string{"x": "sub"})
		},
	}
	calls := []struct {
		fn     toolFunc
		link   string // in pub, to AREA's...
		target string
		tail   string // after the link, for a write
	}{
		{FSRead, "r1", "x/../../pub/a.txt", ""},
		{FSRead, "r2", "x", ""},
		{FSRead, "r3", "x/y/../../../pub/a.txt", ""},
		{FSList, "l1", "x/../../pub/dir", ""},
		{FSList, "l2", "x/y/../../../pub/dir", ""},
		{FSWrite, "w1", "x/../../pub/dir", "/new"},
		{FSWrite, "w2", "x/y/../../../pub/dir", "/new"},
		{FSWrite, "w3", "x/y", "/new"},
	}
	b := restricted([]boundary.Entry{sub(work, boundary.Write)}, []string{work + "/denied"}, nil)
	private := work + "/private"
	allow := func(p string, a boundary.Access) error {
		if p == private || strings.HasPrefix(p, private+"/") {
			return errors.New("no card allows fs:" + string(a) + " " + p)
		}
		return nil
	}
	for _, area := range []struct{ name, reason string }{{"private", ReasonNoCard}, {"denied", ReasonExplicitDeny}} {
		dir := work + "/" + area.name
		for _, c := range calls {
			symlinks(t, work, map[string]string{"pub/" + area.name + "-" + c.link: "../" + area.name + "/" + c.target})
		}
		words := map[string]string{} // per call, the first state's words
		for _, state := range []string{"dir", "missing", "file", "link out", "link in"} {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			states[state](dir)
			for _, c := range calls {
				path := work + "/pub/" + area.name + "-" + c.link + c.tail
				in := map[string]any{"path": path}
				if toolName(c.fn) == ToolFSWrite {
					in["content"] = "x"
				}
				out, err := callAllow(t, c.fn, b, allow, in)
				if got := reasonOf(err); got != area.reason {
					t.Errorf("%s, x %s: %s %s: %v %v, want reason %s", area.name, state, toolName(c.fn), path, out, err, area.reason)
					continue
				}
				if w, ok := words[c.link]; !ok {
					words[c.link] = err.Error()
				} else if err.Error() != w {
					t.Errorf("%s, x %s: %s %s: %q, want the same words whatever x is: %q", area.name, state, toolName(c.fn), path, err, w)
				}
			}
		}
	}
	symlinks(t, work, map[string]string{"pub/fine": "sub/../a.txt", "pub/down": "../private/key"})
	if out, err := callAllow(t, FSRead, b, allow, map[string]any{"path": work + "/pub/fine"}); err != nil || out.(*FSReadOutput).Content != "alpha" {
		t.Errorf("a detour through a readable directory: %v %v", out, err)
	}
	_, err := callAllow(t, FSRead, b, allow, map[string]any{"path": work + "/pub/down"})
	if reasonOf(err) != ReasonNoCard || !strings.Contains(err.Error(), "no card allows fs:read "+private+"/key") {
		t.Errorf("a link down into the refused directory: %v, want no_card naming where it ends", err)
	}
	if _, err := os.Lstat(work + "/pub/dir/new"); !os.IsNotExist(err) {
		t.Errorf("a write through a detour landed: %v", err)
	}
}
