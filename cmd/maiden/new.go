package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/maiden-run/maiden/internal/toolbuild"
)

const newUsage = "usage: maiden new go|js DIR   (the tool is named after DIR's last element)"

// cmdNew creates a tool project from a template and says how to build it,
// call it and add it to agent.toml.
func cmdNew(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs, _ := newFlags("new", stderr)
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, newUsage)
		return exitUsage
	}
	lang, dir := toolbuild.Lang(fs.Arg(0)), fs.Arg(1)
	if lang == "javascript" {
		lang = toolbuild.LangJS
	}
	if lang != toolbuild.LangGo && lang != toolbuild.LangJS {
		fmt.Fprintf(stderr, "maiden new: unknown language %q\n%s\n", fs.Arg(0), newUsage)
		return exitUsage
	}
	p, files, err := toolbuild.NewProject(dir, lang)
	if err != nil {
		fmt.Fprintln(stderr, "maiden new:", err)
		if errors.Is(err, toolbuild.ErrBadName) || errors.Is(err, toolbuild.ErrProjectExists) {
			return exitUsage
		}
		return exitTrap
	}
	fmt.Fprintf(stdout, "created %s, a %s tool named %s:\n", dir, langNames[lang], p.Name)
	sdkFiles := 0
	for _, f := range files {
		if strings.HasPrefix(f, "sdk/") {
			sdkFiles++
			continue
		}
		fmt.Fprintf(stdout, "  %s\n", f)
	}
	if sdkFiles > 0 {
		fmt.Fprintf(stdout, "  sdk/  (%d files: a copy of maiden's Go SDK, see README.md)\n", sdkFiles)
	}
	example := `{"message":"hi","shout":true}`
	wasm := filepath.ToSlash(filepath.Join(dir, p.Name+".wasm"))
	memory := 64
	if lang == toolbuild.LangJS {
		memory = 128 // the JS engine's heap
	}
	fmt.Fprintf(stdout, `
next:
  maiden build %s
  maiden call -config agent.toml %s '%s'

add it to agent.toml (path is relative to agent.toml; this assumes it is in the current directory):

[tools.%s]
path = %q
timeout_ms = 5000
memory_mb = %d
# http_allow = ["api.example.com"]   # hosts it may fetch (https only)
# secrets = ["API_TOKEN"]            # credential names it may ask for; values come from MAIDEN_SECRET_<NAME>
`, dir, p.Name, example, p.Name, wasm, memory)
	return exitOK
}
