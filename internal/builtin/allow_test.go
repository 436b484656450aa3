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

// TestAllowAsksWhereThePathLed: the caller's cards (Allow) are asked about the path each file tool touches, as the
// kernel resolved it beneath the boundary's directory, with the access it needs; a symlink that leads to a path they
// refuse is refused (no_card, their words), nothing read, listed or created; without symlinks the path asked is the
// path the call named.
func TestAllowAsksWhereThePathLed(t *testing.T) {
	if safefs.Method() != "openat2" {
		t.Skip("the openat walk follows no symlink: the path asked is always the path named (safefs's TestAuthorize)")
	}
	work := tempDir(t)
	for _, d := range []string{"pub/w", "private"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"pub/a.txt": "alpha", "private/key": "hunter2"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"pub/link": "../private/key", "pub/dlink": "../private", "pub/w/esc": "../../private"} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	b := restricted([]boundary.Entry{sub(work, boundary.Write)}, nil, nil)
	type ask struct {
		path string
		a    boundary.Access
	}
	var asked []ask
	private := work + "/private"
	allow := func(p string, a boundary.Access) error {
		asked = append(asked, ask{p, a})
		if p == private || strings.HasPrefix(p, private+"/") {
			return errors.New("no card allows fs:" + string(a) + " " + p)
		}
		return nil
	}
	for _, tc := range []struct {
		name   string
		fn     toolFunc
		in     map[string]any
		asked  ask
		refuse bool
	}{
		{"a read", FSRead, map[string]any{"path": work + "/pub/a.txt"}, ask{work + "/pub/a.txt", boundary.Read}, false},
		{"a read through a symlink", FSRead, map[string]any{"path": work + "/pub/link"}, ask{private + "/key", boundary.Read}, true},
		{"a list through a symlink", FSList, map[string]any{"path": work + "/pub/dlink"}, ask{private, boundary.Read}, true},
		{"a write", FSWrite, map[string]any{"path": work + "/pub/w/n.txt", "content": "n"}, ask{work + "/pub/w/n.txt", boundary.Write}, false},
		{"a write through a symlinked parent", FSWrite, map[string]any{"path": work + "/pub/w/esc/new", "content": "x"}, ask{private + "/new", boundary.Write}, true},
		{"an existence check before a write", FSWrite, map[string]any{"path": work + "/pub/dlink/key", "content": "x", "create": false}, ask{private + "/key", boundary.Write}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			out, err := callAllow(t, tc.fn, b, allow, tc.in)
			if len(asked) == 0 || asked[0] != tc.asked {
				t.Errorf("asked %+v, want %+v first", asked, tc.asked)
			}
			if !tc.refuse {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason != ReasonNoCard || !strings.Contains(e.Message, "no card allows fs:") {
				t.Fatalf("got %v, %v; want reason %s with the cards' words", out, err, ReasonNoCard)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Error("the refusal holds the private file's content")
			}
		})
	}
	if got, err := os.ReadFile(private + "/key"); err != nil || string(got) != "hunter2" {
		t.Errorf("private/key now %q, %v", got, err)
	}
	if _, err := os.Lstat(private + "/new"); !os.IsNotExist(err) {
		t.Errorf("a refused write created private/new: %v", err)
	}
}

// TestTarget: what the caller's cards decide before a call runs: the path resolved as the tool resolves it, and the
// access; nothing for another tool or an input the tool refuses itself.
func TestTarget(t *testing.T) {
	ws := boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.WorkspaceWrite, Workspace: "/srv/ws"}
	for _, tc := range []struct {
		tool, in string
		b        boundary.Boundary
		path     string
		a        boundary.Access
		ok       bool
	}{
		{ToolFSRead, `{"path":"/srv/a"}`, ws, "/srv/a", boundary.Read, true},
		{ToolFSList, `{"path":"/srv"}`, ws, "/srv", boundary.Read, true},
		{ToolFSWrite, `{"path":"notes/x.md","content":""}`, ws, "/srv/ws/notes/x.md", boundary.Write, true},
		{ToolFSRead, `{"path":"rel"}`, restricted(nil, nil, nil), "", "", false},    // no workspace: the tool refuses it
		{ToolFSRead, `{"path":"/srv/../etc"}`, ws, "", "", false},                   // not normalised: refused, never cleaned
		{ToolFSRead, `{"path":1}`, ws, "", "", false},                               // not the tool's input
		{ToolWebFetch, `{"url":"https://example.com/"}`, ws, "", "", false},         // not a file tool
		{ToolFSRead, `{"path":"/srv/a"} {"path":"/etc/shadow"}`, ws, "", "", false}, // trailing data: the tool refuses it
	} {
		p, a, ok := Target(tc.tool, tc.b, []byte(tc.in))
		if p != tc.path || a != tc.a || ok != tc.ok {
			t.Errorf("Target(%s, %s) = %q, %q, %v; want %q, %q, %v", tc.tool, tc.in, p, a, ok, tc.path, tc.a, tc.ok)
		}
	}
}

// TestNoExistenceOracleThroughSymlink: a path the cards allow that is a symlink leading where they do not answers
// the same whether or not something is there (no_card, the cards' words about where it led), as the same path named
// directly is refused before anything is looked up (session.FileDecision): the answer never says whether a file the
// agent may not read exists, is a file or a directory. Before the fix a dangling link answered not_found (and a
// component that is a file not_directory) where an existing target answered no_card.
func TestNoExistenceOracleThroughSymlink(t *testing.T) {
	if safefs.Method() != "openat2" {
		t.Skip("the openat walk follows no symlink: every link answers symlink, whatever is behind it")
	}
	work := tempDir(t)
	writeFile(t, work+"/private/key", "hunter2")
	writeFile(t, work+"/pub/a.txt", "alpha")
	for link, target := range map[string]string{
		"pub/there":   "../private/key",         // exists
		"pub/missing": "../private/nope",        // does not
		"pub/deeper":  "../private/nope/x",      // a missing directory on the way
		"pub/notdir":  "../private/key/x",       // a file where a directory would be
		"pub/dthere":  "../private",             // a directory, for fs_list and fs_write's parent
		"pub/dnone":   "../private/nodir",       // no such directory
		"pub/chain":   "missing",                // a link to a dangling link
		"pub/ok":      "a.txt",                  // control: allowed, exists
		"pub/okgone":  "gone.txt",               // control: allowed, missing
		"pub/up":      "../pub/../private/nope", // ".." on the way
	} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	b := restricted([]boundary.Entry{sub(work, boundary.Write)}, nil, nil)
	private := work + "/private"
	allow := func(p string, a boundary.Access) error {
		if p == private || strings.HasPrefix(p, private+"/") {
			return errors.New("no card allows fs:" + string(a) + " " + p)
		}
		return nil
	}
	for _, tc := range []struct {
		fn     toolFunc
		in     map[string]any
		reason string
	}{
		{FSRead, map[string]any{"path": work + "/pub/there"}, ReasonNoCard},
		{FSRead, map[string]any{"path": work + "/pub/missing"}, ReasonNoCard},
		{FSRead, map[string]any{"path": work + "/pub/deeper"}, ReasonNoCard},
		{FSRead, map[string]any{"path": work + "/pub/notdir"}, ReasonNoCard},
		{FSRead, map[string]any{"path": work + "/pub/chain"}, ReasonNoCard},
		{FSRead, map[string]any{"path": work + "/pub/up"}, ReasonNoCard},
		{FSList, map[string]any{"path": work + "/pub/dthere"}, ReasonNoCard},
		{FSList, map[string]any{"path": work + "/pub/dnone"}, ReasonNoCard},
		{FSList, map[string]any{"path": work + "/pub/there"}, ReasonNoCard}, // a file, not a directory
		{FSWrite, map[string]any{"path": work + "/pub/dthere/new", "content": "x"}, ReasonNoCard},
		{FSWrite, map[string]any{"path": work + "/pub/dnone/new", "content": "x"}, ReasonNoCard},
		{FSWrite, map[string]any{"path": work + "/pub/there/new", "content": "x"}, ReasonNoCard}, // a file as the parent
		// Controls: where the cards allow, the filesystem's own answers stay.
		{FSRead, map[string]any{"path": work + "/pub/okgone"}, ReasonNotFound},
		{FSRead, map[string]any{"path": work + "/pub/nothing"}, ReasonNotFound},
		{FSWrite, map[string]any{"path": work + "/pub/nodir/new", "content": "x"}, ReasonNotFound},
		{FSList, map[string]any{"path": work + "/pub/a.txt"}, ReasonNotDirectory},
	} {
		_, err := callAllow(t, tc.fn, b, allow, tc.in)
		var e *Error
		if !errors.As(err, &e) || e.Reason != tc.reason {
			t.Errorf("%s %v: %v, want reason %s", toolName(tc.fn), tc.in["path"], err, tc.reason)
			continue
		}
		if tc.reason == ReasonNoCard && !strings.Contains(e.Message, "no card allows fs:") {
			t.Errorf("%s %v: %v, want the cards' words", toolName(tc.fn), tc.in["path"], err)
		}
	}
	if out, err := callAllow(t, FSRead, b, allow, map[string]any{"path": work + "/pub/ok"}); err != nil || out.(*FSReadOutput).Content != "alpha" {
		t.Errorf("read through an allowed link: %v %v", out, err)
	}
	for _, p := range []string{private + "/new", private + "/nodir"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s was created: %v", p, err)
		}
	}
}
