package session

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/sandbox"
)

func TestPreopensFor(t *testing.T) {
	sub := func(p string, a boundary.Access) boundary.Entry {
		return boundary.Entry{Path: p, Access: a, Match: boundary.Subtree}
	}
	managed := func(entries ...boundary.Entry) boundary.Boundary {
		return boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Entries: entries}
	}
	ro := func(p string) sandbox.Preopen { return sandbox.Preopen{HostPath: p, GuestPath: p} }
	rw := func(p string) sandbox.Preopen { return sandbox.Preopen{HostPath: p, GuestPath: p, Write: true} }
	reader, writer := config.Tool{Name: "t", FS: config.FSRead}, config.Tool{Name: "t", FS: config.FSWrite}
	work := managed(sub("/srv/work", boundary.Write), sub("/srv/docs", boundary.Read))

	withDeny := func(b boundary.Boundary, deny ...string) boundary.Boundary { b.Deny = deny; return b }
	withProtected := func(b boundary.Boundary, names ...string) boundary.Boundary { b.Protected = names; return b }
	many := managed()
	for i := range sandbox.MaxPreopens + 3 {
		many.Entries = append(many.Entries, sub(fmt.Sprintf("/d/%02d", i), boundary.Read))
	}
	var manyWant []sandbox.Preopen
	for i := range sandbox.MaxPreopens {
		manyWant = append(manyWant, ro(fmt.Sprintf("/d/%02d", i)))
	}

	for _, c := range []struct {
		name  string
		tool  config.Tool
		b     boundary.Boundary
		want  []sandbox.Preopen
		notes []string // each a substring of one note, in order
	}{
		{"no fs key: nothing", config.Tool{Name: "t"}, work, nil, nil},
		{"fs read: every entry read-only", reader, work, []sandbox.Preopen{ro("/srv/docs"), ro("/srv/work")}, nil},
		{"fs write: write only where the entry allows it", writer, work, []sandbox.Preopen{ro("/srv/docs"), rw("/srv/work")}, nil},
		{"exact entries are files, not preopened", writer,
			managed(boundary.Entry{Path: "/srv/a.txt", Access: boundary.Write, Match: boundary.Exact}, sub("/srv/work", boundary.Write)),
			[]sandbox.Preopen{rw("/srv/work")}, []string{"/srv/a.txt: an exact entry is not preopened"}},
		{"a deny root inside an entry drops the entry", writer, withDeny(work, "/srv/work/secrets"),
			[]sandbox.Preopen{ro("/srv/docs")}, []string{"/srv/work: left out, because deny root /srv/work/secrets is inside it"}},
		{"an entry inside a deny root is dropped", writer, withDeny(work, "/srv"),
			nil, []string{"/srv/work: left out, because deny root /srv contains it", "/srv/docs: left out"}},
		{"a deny root beside an entry changes nothing", writer, withDeny(work, "/srv/workshop"),
			[]sandbox.Preopen{ro("/srv/docs"), rw("/srv/work")}, nil},
		{"protected names make every preopen read-only", writer, withProtected(work, ".git"),
			[]sandbox.Preopen{ro("/srv/docs"), ro("/srv/work")}, []string{"/srv/work: read-only, because the boundary protects .git"}},
		{"an external boundary gives nothing", writer, boundary.Boundary{Kind: boundary.External, Entries: work.Entries}, nil, []string{"external"}},
		{"a bypass boundary gives its entries, not the root", writer,
			boundary.Boundary{Kind: boundary.Bypass, Filesystem: boundary.Unrestricted, Entries: work.Entries},
			[]sandbox.Preopen{ro("/srv/docs"), rw("/srv/work")}, nil},
		{"workspace-write: the workspace, never / or /tmp", writer,
			boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.WorkspaceWrite, Workspace: "/home/u/proj"},
			[]sandbox.Preopen{rw("/home/u/proj")}, nil},
		{"unrestricted: only the entries", reader,
			boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Unrestricted}, nil, nil},
		{"the strongest access per path", writer, managed(sub("/a", boundary.Read), sub("/a", boundary.Write)), []sandbox.Preopen{rw("/a")}, nil},
		{"inside another with no more access: left out", writer,
			managed(sub("/a", boundary.Write), sub("/a/b", boundary.Read), sub("/a/c", boundary.Write), sub("/ab", boundary.Read)),
			[]sandbox.Preopen{rw("/a"), ro("/ab")}, nil},
		{"a writable directory inside a read-only one is kept", writer,
			managed(sub("/a", boundary.Read), sub("/a/b", boundary.Write)), []sandbox.Preopen{ro("/a"), rw("/a/b")}, nil},
		{"the same nested under fs read collapses", reader,
			managed(sub("/a", boundary.Read), sub("/a/b", boundary.Write)), []sandbox.Preopen{ro("/a")}, nil},
		{"at most MaxPreopens", reader, many, manyWant, []string{"/d/32: left out, over the 32 directories", "/d/33", "/d/34"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, notes := PreopensExplained(c.tool, c.b)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("preopens (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(got, PreopensFor(c.tool, c.b)); diff != "" {
				t.Errorf("PreopensFor differs from PreopensExplained:\n%s", diff)
			}
			if len(notes) != len(c.notes) {
				t.Fatalf("notes %q, want %d", notes, len(c.notes))
			}
			for i, n := range c.notes {
				if !strings.Contains(notes[i], n) {
					t.Errorf("note %d = %q, want it to contain %q", i, notes[i], n)
				}
			}
			// Whatever the rule gives, the sandbox accepts.
			if err := sandbox.ValidatePreopens(got); err != nil {
				t.Errorf("invalid preopens: %v", err)
			}
		})
	}
}
