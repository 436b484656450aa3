package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/safetext"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/toolbuild"
)

var langNames = map[toolbuild.Lang]string{
	toolbuild.LangGo:  "Go",
	toolbuild.LangJS:  "JavaScript",
	toolbuild.LangWAT: "WAT",
}

const buildUsage = "usage: maiden build [-o OUT.wasm] [-watch] [DIR | FILE.go | FILE.js | FILE.wat]"

// cmdBuild turns a tool project into NAME.wasm, then loads the result the
// way `maiden call` would, so a tool that builds but breaks the contract is
// caught here rather than on its first call. With -watch it rebuilds on
// every change to the sources until interrupted.
func cmdBuild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, c := newFlags("build", stderr)
	out := fs.String("o", "", "output `FILE` (default: NAME.wasm in the project directory)")
	watch := fs.Bool("watch", false, "rebuild whenever a source file changes, until interrupted")
	preinit := fs.String("preinit", os.Getenv(toolbuild.PreinitEnv), "Go tools: `MODE` auto (snapshot init at build time when safe), off, or require (fail instead of falling back); default $"+toolbuild.PreinitEnv+" or auto")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	switch strings.ToLower(strings.TrimSpace(*preinit)) {
	case "", "auto":
		os.Unsetenv(toolbuild.PreinitEnv)
	case "off", "0", "false":
		os.Setenv(toolbuild.PreinitEnv, "off")
	case "require":
		os.Setenv(toolbuild.PreinitEnv, "require")
	default:
		fmt.Fprintf(stderr, "maiden build: -preinit %q: want auto, off or require\n", *preinit)
		return exitUsage
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, buildUsage)
		return exitUsage
	}
	path := "."
	if fs.NArg() == 1 {
		path = fs.Arg(0)
	}
	b, code := newBuilder(ctx, c, path, *out, stdout, stderr)
	if code != exitOK {
		return code
	}
	defer b.close()
	p := b.p
	if *watch {
		return b.watch(ctx)
	}
	code = b.build(ctx)
	if code == exitOK && builtWorld(b.out) == sandbox.WorldMiddleware {
		fmt.Fprintf(stderr, "declare it in agent.toml and put it in a chain:\n\n%s", middlewareTable(p.Name, b.out, middlewareMemoryMB(p.Lang)))
	} else if code == exitOK {
		suggestTable(stderr, c.config, p.Name, b.out)
	}
	return code
}

// newBuilder is maiden build's builder for the project at path (a
// directory or one source file) into out (default: NAME.wasm in the
// project directory), its toolchain ready: the one build path, which
// maiden publish DIR uses too. Close it when done.
func newBuilder(ctx context.Context, c *common, path, out string, stdout, stderr io.Writer) (builder, int) {
	p, err := toolbuild.DetectProject(path)
	if err != nil {
		fmt.Fprintln(stderr, "maiden build:", err)
		return builder{}, exitUsage
	}
	if out == "" {
		out = p.DefaultOutput()
	}
	// The toolchain's progress quotes the project (a Go tool's own output
	// while its init ran, in a snapshot warning): escaped, like its errors.
	tc, err := toolbuild.EnsureToolchain(ctx, &toolbuild.Options{Progress: textWriter{stderr}})
	if err != nil {
		fmt.Fprintln(stderr, "maiden build:", err)
		return builder{}, exitUsage
	}
	// The built file is checked the way a call loads it: in a worker
	// process by default, so a component that crashes the code generator
	// fails the build instead of killing maiden.
	return builder{tc: tc, h: new(*maiden.Host), c: c, p: p, out: out, stdout: stdout, stderr: stderr}, exitOK
}

// close closes the host the build's check made, if any.
func (b builder) close() {
	if b.h != nil && *b.h != nil {
		(*b.h).Close(context.Background())
	}
}

// suggestTable tells what to do with the tool built at out: nothing if
// agent.toml (cfg) already has a tool at that path (how to call it), else
// the table to add, its path relative to agent.toml.
func suggestTable(w io.Writer, cfg, name, out string) {
	absOut, err := filepath.Abs(out)
	if err != nil {
		absOut = out
	}
	if loaded, err := config.Load(cfg); err == nil {
		for _, t := range loaded.Tools() {
			if t.Path != "" && filepath.Clean(t.Path) == absOut {
				callCfg := ""
				if cfg != "agent.toml" {
					callCfg = "-config " + cfg + " "
				}
				fmt.Fprintf(w, "%s's [tools.%s] runs it: maiden call %s%s '{...}'\n", cfg, t.Name, callCfg, t.Name)
				return
			}
		}
	}
	where := cfg
	if _, err := os.Stat(cfg); err != nil {
		where = cfg + " (which does not exist yet: start it with the line version = 1)"
	}
	fmt.Fprintf(w, "add it to %s (path relative to its directory):\n\n[tools.%s]\npath = %s\n", terminalSafe(where), terminalSafe(name), tomlString(wasmPathFrom(cfg, absOut)))
}

type builder struct {
	tc             *toolbuild.Toolchain
	h              **maiden.Host // one tool, "built", at out; made after the first build
	c              *common
	p              toolbuild.Project
	out            string
	stdout, stderr io.Writer
}

// checkHost is a host whose only tool is the file being built, with the
// default limits, isolated as the command line says; what it compiles is
// announced on stderr.
func checkHost(out string, c *common, stderr io.Writer) (*maiden.Host, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(abs)
	toml := fmt.Sprintf("version = 1\n\n[tools.built]\npath = %s\n", tomlString(abs))
	cfg, err := config.Parse(filepath.Join(dir, "agent.toml"), []byte(toml), dir)
	if err != nil {
		return nil, err
	}
	return maiden.New(cfg, &maiden.Options{CacheDir: c.cache, Isolation: c.isolation.value(), WorkerCommand: workerArgv(c.isolation.value()),
		OnCompile: buildCompileNote(stderr)})
}

// buildCompileNote says that the component just built is being compiled
// to check that it loads, which for a JavaScript one took as long again as
// the build, silent, before its description. maiden build reports its
// progress on stderr, terminal or not.
func buildCompileNote(stderr io.Writer) func(path string) {
	var mu sync.Mutex
	return func(path string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stderr, "compiling %s for this machine, to check that it loads (cached for maiden call and serve)\n", terminalSafe(filepath.Base(path)))
	}
}

// build builds once and checks that the result loads.
func (b builder) build(ctx context.Context) int {
	p := b.p
	// The project's name and paths are a directory's names, which a cloned
	// repository chooses: escaped, as the tool's own text is.
	fmt.Fprintf(b.stderr, "building %s (%s) from %s\n", terminalSafe(p.Name), langNames[p.Lang], terminalSafe(p.Source))
	start := time.Now()
	if err := b.tc.Build(ctx, p, b.out); err != nil {
		fmt.Fprintln(b.stderr, "maiden build:", safetext.Text(err.Error()))
		if errors.Is(err, toolbuild.ErrBuild) {
			return exitTool
		}
		return exitUsage
	}
	size := int64(0)
	if fi, err := os.Stat(b.out); err == nil {
		size = fi.Size()
	}
	fmt.Fprintf(b.stderr, "wrote %s (%.1f MB) in %v\n", terminalSafe(b.out), float64(size)/1e6, time.Since(start).Round(100*time.Millisecond))

	if builtWorld(b.out) == sandbox.WorldMiddleware {
		// A middleware is not a tool: load it as the host loads middleware.
		return b.checkMiddleware(ctx)
	}
	if *b.h == nil {
		h, err := checkHost(b.out, b.c, b.stderr)
		if err != nil {
			fmt.Fprintln(b.stderr, "maiden build:", safetext.Text(err.Error()))
			return exitUsage
		}
		*b.h = h
	}
	infos, err := (*b.h).Tools(ctx)
	if err == nil && len(infos) == 1 && infos[0].Error != nil {
		err = infos[0].Error
	}
	if err != nil {
		fmt.Fprintf(b.stderr, "maiden build: %s built but cannot be loaded: %s\n", terminalSafe(b.out), safetext.Text(err.Error()))
		if p.Lang == toolbuild.LangGo {
			fmt.Fprintln(b.stderr, "  (a Go tool must call maiden.Register from an init function; `maiden call` shows the tool's log, where a panic's message is)")
		}
		return exitTrap
	}
	info := infos[0]
	fmt.Fprintf(b.stdout, "%s: %s\n", terminalSafe(p.Name), terminalSafe(info.Description))
	return exitOK
}

// textWriter escapes what is written through it as safetext.Text does
// (lines stay lines): the messages of a build quote the project being
// built, which can be anyone's (a project cloned from the internet), and
// must not drive the terminal of whoever builds it. One write is one
// message (the toolchain writes each progress line whole).
type textWriter struct{ w io.Writer }

func (t textWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, safetext.Text(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// watchInterval is how often -watch looks at the sources. Polling a
// handful of files costs nothing measurable and needs no platform-specific
// notification API; half a second is below what a person notices after
// saving, next to a build that takes seconds.
var watchInterval = 500 * time.Millisecond

// watch builds, then rebuilds whenever the sources change, until ctx ends.
// A failed build is reported and watching goes on. The output is replaced
// atomically, so a running `maiden serve` hot-reloads it on its next call.
func (b builder) watch(ctx context.Context) int {
	last := b.snapshot()
	b.build(ctx)
	fmt.Fprintf(b.stderr, "watching %s for changes (Ctrl-C to stop)\n", b.watchRoot())
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(b.stderr, "stopped watching")
			return exitOK
		case <-tick.C:
		}
		cur := b.snapshot()
		if maps.Equal(cur, last) {
			continue
		}
		// Let an editor finish writing (several files, or write-then-rename)
		// before building: wait until two looks in a row agree.
		for {
			select {
			case <-ctx.Done():
				fmt.Fprintln(b.stderr, "stopped watching")
				return exitOK
			case <-tick.C:
			}
			next := b.snapshot()
			if maps.Equal(next, cur) {
				break
			}
			cur = next
		}
		last = cur
		fmt.Fprintf(b.stderr, "\n%s changed; rebuilding\n", describeChange(last))
		b.build(ctx)
	}
}

type stamp struct {
	mod  time.Time
	size int64
}

func (b builder) watchRoot() string {
	if b.p.Lang == toolbuild.LangGo {
		return b.p.Dir
	}
	return b.p.Source
}

// snapshot stats the files a rebuild depends on: for Go every .go file,
// go.mod and go.sum under the project directory (not in hidden directories,
// testdata or node_modules); otherwise the one source file.
func (b builder) snapshot() map[string]stamp {
	files := map[string]stamp{}
	add := func(p string) {
		if fi, err := os.Stat(p); err == nil {
			files[p] = stamp{fi.ModTime(), fi.Size()}
		}
	}
	if b.p.Lang != toolbuild.LangGo {
		add(b.p.Source)
		return files
	}
	filepath.WalkDir(b.p.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if p != b.p.Dir && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") || name == "go.mod" || name == "go.sum" {
			add(p)
		}
		return nil
	})
	return files
}

func describeChange(m map[string]stamp) string {
	var newest string
	var t time.Time
	for p, s := range m {
		if s.mod.After(t) {
			newest, t = p, s.mod
		}
	}
	if newest == "" {
		return "the source"
	}
	return filepath.Base(newest)
}
