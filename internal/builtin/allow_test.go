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
