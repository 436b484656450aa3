// Command fsprobe is a hostile Go tool for the WASI preopened directories a
// call may be given: it does whatever its input asks with the standard os
// package, so tests can check what the guest can and cannot reach.
//
//	{"op": "read", "path": P}                 the file's text
//	{"op": "write", "path": P, "content": C}  creates or truncates P
//	{"op": "list", "path": P}                 the names in a directory, one a line
//	{"op": "mkdir", "path": P}
//	{"op": "remove", "path": P}
//	{"op": "rename", "path": P, "target": T}
//	{"op": "symlink", "path": P, "target": T} makes P a symlink to T
//	{"op": "readloop", "path": P, "count": N} reads P N times and returns
//	                                          each distinct text it saw
//	                                          (or error) once, one a line
//
// A failure is the tool's error: the Go error text.
package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type input struct {
	Op      string `json:"op"`
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`
	Target  string `json:"target,omitempty"`
	Count   int    `json:"count,omitempty"`
}

// loaded reads the clock while the tool initialises, which keeps maiden
// build from pre-initialising it (see internal/toolbuild/preinit.go): the
// suite runs against an ordinary build with this tool, whose init lists the
// call's preopened directories itself, and against a pre-initialised one
// with go/fsprobesnap, whose restore lists them again.
var loaded = time.Now()

func main() { _ = loaded }

func init() {
	maiden.Register(maiden.Func("reads and writes files under WASI preopened directories", func(ctx context.Context, in input) (string, error) {
		switch in.Op {
		case "read":
			b, err := os.ReadFile(in.Path)
			return string(b), err
		case "write":
			return "written", os.WriteFile(in.Path, []byte(in.Content), 0o644)
		case "list":
			es, err := os.ReadDir(in.Path)
			if err != nil {
				return "", err
			}
			var names []string
			for _, e := range es {
				names = append(names, e.Name())
			}
			return strings.Join(names, "\n"), nil
		case "mkdir":
			return "made", os.Mkdir(in.Path, 0o755)
		case "remove":
			return "removed", os.Remove(in.Path)
		case "rename":
			return "renamed", os.Rename(in.Path, in.Target)
		case "symlink":
			return "linked", os.Symlink(in.Target, in.Path)
		case "readloop":
			var seen []string
			for range in.Count {
				b, err := os.ReadFile(in.Path)
				s := string(b)
				if err != nil {
					s = "error: " + err.Error()
				}
				if !slices.Contains(seen, s) {
					seen = append(seen, s)
				}
			}
			return strings.Join(seen, "\n"), nil
		}
		return "", os.ErrInvalid
	}))
}
