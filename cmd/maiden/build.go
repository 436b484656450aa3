package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/toolbuild"
)

var langNames = map[toolbuild.Lang]string{
	toolbuild.LangJS:  "JavaScript",
	toolbuild.LangWAT: "WAT",
}

// cmdBuild turns a tool project into NAME.wasm, then loads the result the
// way `maiden call` would, so a tool that builds but breaks the contract is
// caught here rather than on its first call.
func cmdBuild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, c := newFlags("build", stderr)
	out := fs.String("o", "", "output file (default: NAME.wasm in the project directory)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "usage: maiden build [-o OUT.wasm] [DIR | FILE.js | FILE.wat]")
		return exitUsage
	}
	path := "."
	if fs.NArg() == 1 {
		path = fs.Arg(0)
	}
	p, err := toolbuild.DetectProject(path)
	if err != nil {
		fmt.Fprintln(stderr, "maiden build:", err)
		return exitUsage
	}
	if *out == "" {
		*out = p.DefaultOutput()
	}
	fmt.Fprintf(stderr, "building %s (%s) from %s\n", p.Name, langNames[p.Lang], p.Source)
	tc, err := toolbuild.EnsureToolchain(ctx, &toolbuild.Options{Progress: stderr})
	if err != nil {
		fmt.Fprintln(stderr, "maiden build:", err)
		return exitUsage
	}
	start := time.Now()
	if err := tc.Build(ctx, p, *out); err != nil {
		fmt.Fprintln(stderr, "maiden build:", err)
		if errors.Is(err, toolbuild.ErrBuild) {
			return exitTool
		}
		return exitUsage
	}
	size := int64(0)
	if fi, err := os.Stat(*out); err == nil {
		size = fi.Size()
	}
	fmt.Fprintf(stderr, "wrote %s (%.1f MB) in %v\n", *out, float64(size)/1e6, time.Since(start).Round(100*time.Millisecond))

	sb, err := sandbox.New(&sandbox.Options{CacheDir: c.cache})
	if err != nil {
		fmt.Fprintln(stderr, "maiden build:", err)
		return exitUsage
	}
	defer sb.Close()
	info, err := sb.Load(ctx, *out, sandbox.Limits{Timeout: config.DefaultTimeout, Memory: config.DefaultMemoryMB << 20})
	if err != nil {
		fmt.Fprintf(stderr, "maiden build: %s built but cannot be loaded: %v\n", *out, err)
		return exitTrap
	}
	fmt.Fprintf(stdout, "%s: %s\n", p.Name, info.Description)
	fmt.Fprintf(stderr, "add it to agent.toml:\n\n[tools.%s]\npath = %q\n", p.Name, *out)
	return exitOK
}
