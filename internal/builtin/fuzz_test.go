package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/boundary"
)

// FuzzFSTools feeds arbitrary inputs to the three file tools over a boundary that allows writing one directory,
// denies a directory inside it and protects .git, with symlinks to the outside and to the denied directory inside.
// Whatever the input: no panic, the error is a *boundary.CommandError or an *Error, an output only when the error
// is nil, and nothing outside the writable directory or under the deny is read, nothing there or under .git is
// changed or created.
//
//	go test -run XX -fuzz FuzzFSTools -fuzztime 60s ./internal/builtin
func FuzzFSTools(f *testing.F) {
	for _, s := range []string{
		`{"path":"W/f"}`, `{"path":"W/f","content":"x"}`, `{"path":"W"}`, `{"path":"W/out/secret"}`,
		`{"path":"W/deny/key"}`, `{"path":"W/ln/key","content":"x"}`, `{"path":"W/.git/config","content":"x"}`,
		`{"path":"W/../outside/secret"}`, `{"path":"W/out","content":"x"}`, `{"path":"W/f","content":"AAE=","encoding":"base64"}`,
		`{"path":"W/g/config","content":"x","create":false}`, `{"path":"f"}`, `{"path":"W/f\u0000"}`,
	} {
		f.Add(uint8(0), s)
		f.Add(uint8(1), s)
		f.Add(uint8(2), s)
	}
	base, err := os.MkdirTemp("", "builtin-fuzz-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(base) })
	base, _ = filepath.EvalSymlinks(base)
	work, outside := base+"/work", base+"/outside"
	for p, c := range map[string]string{
		outside + "/secret": "OUTSIDE", work + "/deny/key": "OUTSIDE", work + "/.git/config": "GIT", work + "/f": "f",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	for link, target := range map[string]string{"out": "../outside", "abs": outside + "/secret", "ln": "deny", "g": ".git"} {
		if err := os.Symlink(target, work+"/"+link); err != nil {
			f.Fatal(err)
		}
	}
	// Restricted, not workspace-write: the temporary directory is under /tmp, which workspace-write makes writable.
	b := restricted([]boundary.Entry{sub(work, boundary.Write)}, []string{work + "/deny"}, []string{".git"})
	tools := []toolFunc{FSRead, FSWrite, FSList}
	f.Fuzz(func(t *testing.T, which uint8, in string) {
		in = strings.ReplaceAll(in, "W", work)
		// The cards are asked only about paths beneath the boundary's directory, outside its deny.
		allow := func(p string, _ boundary.Access) error {
			if !within(p, work) || within(p, work+"/deny") {
				t.Errorf("asked the cards about %s, not beneath %s outside its deny", p, work)
			}
			return nil
		}
		out, err := tools[int(which)%3](context.Background(), b, allow, []byte(in))
		if err != nil {
			var ce *boundary.CommandError
			var be *Error
			if !errors.As(err, &ce) && !errors.As(err, &be) {
				t.Fatalf("error %v is %T", err, err)
			}
			if ce != nil && ce.Reason == boundary.ReasonBoundaryRequired && ce.RequiredExpansion == nil {
				t.Fatalf("sandbox_boundary_required without an expansion: %+v", ce)
			}
			if out != nil {
				t.Fatal("an output with an error")
			}
		} else if out == nil {
			t.Fatal("no output and no error")
		}
		if r, ok := out.(*FSReadOutput); ok && (strings.Contains(r.Content, "OUTSIDE") || strings.Contains(r.Content, "T1VUU0lERQ")) {
			t.Fatalf("read the outside, the deny or .git: %+v", r)
		}
		for p, want := range map[string]string{outside + "/secret": "OUTSIDE", work + "/deny/key": "OUTSIDE", work + "/.git/config": "GIT"} {
			if got, err := os.ReadFile(p); err != nil || string(got) != want {
				t.Fatalf("%s changed: %q %v", p, got, err)
			}
		}
		for _, d := range []string{outside, work + "/deny", work + "/.git"} {
			if ents, _ := os.ReadDir(d); len(ents) != 1 {
				t.Fatalf("something was planted in %s: %v", d, ents)
			}
		}
	})
}
