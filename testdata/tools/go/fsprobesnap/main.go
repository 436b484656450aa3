// Command fsprobesnap is go/fsprobe built the default way: nothing it does
// while it initialises keeps maiden build from pre-initialising it, so it
// checks that a snapshot tool still sees each call's WASI preopened
// directories (internal/toolbuild/preinit_fs.go). It takes fsprobe's inputs
// (read, write, list, mkdir, remove, rename, symlink, readloop) and one more:
//
//	{"op": "wd"}  "init=W0 call=W1": the working directory as init saw it
//	              and as the call sees it (os.Getwd; "error: ..." on error)
//
// In a call given directories, init=<empty or error> with call=<the first
// directory> shows the tool was pre-initialised (its init ran at build
// time, with no directory) and that the call's directories were listed
// again; an ordinary build's init runs in the call and sees them too.
//
// A failure is the tool's error: the Go error text.
package main

import (
	"context"
	"os"
	"slices"
	"strings"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type input struct {
	Op      string `json:"op"`
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`
	Target  string `json:"target,omitempty"`
	Count   int    `json:"count,omitempty"`
}

// initWd is the working directory while the tool initialised.
var initWd = getwd()

func getwd() string {
	wd, err := os.Getwd()
	if err != nil {
		return "error: " + err.Error()
	}
	return wd
}

func main() {}

func init() {
	maiden.Register(maiden.Func("reads and writes files under WASI preopened directories (pre-initialised)", func(ctx context.Context, in input) (string, error) {
		switch in.Op {
		case "wd":
			return "init=" + initWd + " call=" + getwd(), nil
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
