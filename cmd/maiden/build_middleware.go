package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/compcache"
	"github.com/maiden-run/maiden/internal/safetext"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/toolbuild"
	"github.com/maiden-run/maiden/internal/worker"
)

// builtWorld is the world of the component at path (sandbox.WorldTool or
// WorldMiddleware), read from its exports without compiling it; "" if the
// file cannot be read as a component (the tool check then says why).
func builtWorld(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	w, err := sandbox.WorldOf(b)
	if err != nil {
		return ""
	}
	return w
}

// checkMiddleware loads a built middleware component as the host will (in
// a worker process unless -isolation process): its imports and exports are
// checked against maiden:middleware and its describe() runs. It prints the
// description.
func (b builder) checkMiddleware(ctx context.Context) int {
	var runner sandbox.Runner
	var err error
	if b.c.isolation.value() == maiden.InProcess {
		runner, err = sandbox.New(&sandbox.Options{CacheDir: b.c.cache, OnCompile: buildCompileNote(b.stderr)})
	} else {
		dir := b.c.cache
		switch dir {
		case "off":
			dir = ""
		case "":
			dir = compcache.DefaultDir()
		}
		runner, err = worker.New(&worker.Options{Size: 1, CacheDir: dir, Command: workerCommand(), OnCompile: buildCompileNote(b.stderr)})
	}
	if err != nil {
		fmt.Fprintln(b.stderr, "maiden build:", err)
		return exitUsage
	}
	defer runner.Shutdown(context.Background())
	lim := sandbox.Limits{Timeout: 5 * time.Second, Memory: uint64(middlewareMemoryMB(b.p.Lang)) << 20}
	t, err := runner.Open(ctx, b.out, lim)
	if err == nil && t.World != sandbox.WorldMiddleware {
		err = fmt.Errorf("it is a %s component, not a middleware", t.World)
	}
	if err != nil {
		fmt.Fprintf(b.stderr, "maiden build: %s built but cannot be loaded as a middleware: %s\n", b.out, safetext.Text(err.Error()))
		return exitTrap
	}
	fmt.Fprintf(b.stdout, "%s: %s\n", terminalSafe(b.p.Name), terminalSafe(t.Description))
	return exitOK
}

// middlewareMemoryMB is the memory_mb a new middleware of lang gets: a JS
// engine's heap needs more than Go.
func middlewareMemoryMB(lang toolbuild.Lang) int {
	if lang == toolbuild.LangJS {
		return 128
	}
	return 64
}
