package testkit

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestNoRacePackagesStartNoGoroutine holds scripts/test's reason for running
// the packages it names in norace=(...) without the race detector: a data
// race needs two goroutines, and nothing in those test binaries starts a
// second one. For each package it reads every .go file of the package (its
// tests included) and the non-test files of every module package its code
// imports, directly or not, and fails naming what it found: a go statement,
// a call that runs a function on another goroutine (t.Parallel,
// b.RunParallel, WaitGroup.Go, time.AfterFunc, context.AfterFunc), or, in
// the package itself, an import that brings goroutines or shared state
// (sync, sync/atomic, os/exec, os/signal, net/http, database/sql, ...) or
// a connection (net.Listen, net.Dial, a lookup; net.SplitHostPort is
// fine). The packages it imports may hold a mutex or an atomic cache,
// which starts nothing. A module package only its tests import is read
// the same way (its non-test files, and what they import); one that starts
// goroutines somewhere in there may still be used for its constants alone.
// A package that fails here goes back under -race:
// remove it from scripts/test's norace list.
func TestNoRacePackagesStartNoGoroutine(t *testing.T) {
	root := RepoRoot(t)
	pkgs, err := noRacePackages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("scripts/test's norace=(...) names no package")
	}
	for _, p := range pkgs {
		t.Run(p, func(t *testing.T) {
			problems, err := concurrencyIn(root, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, msg := range problems {
				t.Errorf("%s runs without -race (scripts/test's norace) but %s", p, msg)
			}
		})
	}
}

// TestConcurrencyInFindsEachKind plants each kind of concurrency in a
// package of its own and checks that concurrencyIn names it: the guard
// above must not pass a package because it looks in the wrong place.
func TestConcurrencyInFindsEachKind(t *testing.T) {
	for _, tt := range []struct {
		name, file, src, want string
	}{
		{"go statement", "a.go", "package p\nfunc F() { go func() {}() }\n", "a go statement"},
		{"go statement in a test", "a_test.go", "package p\nfunc G() { go G() }\n", "a go statement"},
		{"parallel test", "a_test.go", "package p\nimport \"testing\"\nfunc TestX(t *testing.T) { t.Parallel() }\n", "t.Parallel"},
		{"timer callback", "a.go", "package p\nimport \"time\"\nvar _ = time.AfterFunc(0, func() {})\n", "time.AfterFunc"},
		{"sync", "a.go", "package p\nimport \"sync\"\nvar mu sync.Mutex\n", `imports "sync"`},
		{"network", "a_test.go", "package p\nimport _ \"net/http/httptest\"\n", `imports "net/http/httptest"`},
		{"a listener", "a_test.go", "package p\nimport \"net\"\nvar _, _ = net.Listen(\"tcp\", \"127.0.0.1:0\")\n", "uses net.Listen"},
		{"dependency's go statement", "a.go", "package p\nimport \"" + modulePath + "/q\"\nvar _ = q.F\n", "q/q.go"},
		{"test-only import used for more than constants", "a_test.go", "package p\nimport \"" + modulePath + "/q\"\nvar _ = q.F\n", "uses q.F"},
		{"test-only import's dependency's go statement", "a_test.go", "package p\nimport \"" + modulePath + "/s\"\nvar _ = s.G\n", "q/q.go"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write := func(rel, src string) {
				p := filepath.Join(root, filepath.FromSlash(rel))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("p/"+tt.file, tt.src)
			write("q/q.go", "package q\nconst C = 1\nfunc F() { go func() {}() }\n")
			write("s/s.go", "package s\nimport \""+modulePath+"/q\"\nfunc G() { q.F() }\n")
			problems, err := concurrencyIn(root, "./p")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Errorf("concurrencyIn = %q, want a problem naming %q", problems, tt.want)
			}
		})
	}
	// And a package of the kind the list holds passes: a test-only import
	// used for a constant, one without goroutines used for a function, a
	// dependency without goroutines.
	root := t.TempDir()
	for rel, src := range map[string]string{
		"p/p.go":      "package p\nimport \"" + modulePath + "/r\"\nfunc F() int { return r.N() }\n",
		"p/p_test.go": "package p\nimport (\n\"testing\"\n\"" + modulePath + "/q\"\n\"" + modulePath + "/u\"\n)\nfunc TestF(t *testing.T) { t.Run(\"x\", func(t *testing.T) { _ = F() + q.C + u.H() }) }\n",
		"u/u.go":      "package u\nimport \"" + modulePath + "/r\"\nfunc H() int { return r.N() }\n",
		"q/q.go":      "package q\nconst C = 1\nfunc F() { go func() {}() }\n",
		"r/r.go":      "package r\nimport \"sync/atomic\"\nvar n atomic.Int64\nfunc N() int { return int(n.Add(1)) }\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if problems, err := concurrencyIn(root, "./p"); err != nil || len(problems) > 0 {
		t.Errorf("concurrencyIn of a single-goroutine package = %q, %v; want nothing", problems, err)
	}
}

var noRaceLineRE = regexp.MustCompile(`(?m)^norace=\(([^)]*)\)`)

// noRacePackages reads scripts/test's norace=(...) line.
func noRacePackages(root string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "scripts", "test"))
	if err != nil {
		return nil, err
	}
	m := noRaceLineRE.FindSubmatch(b)
	if m == nil {
		return nil, fmt.Errorf("scripts/test has no norace=(...) line")
	}
	return strings.Fields(string(m[1])), nil
}

// noRaceImports are what a package run without -race may not import
// itself: each starts goroutines or exists to share state between them.
var noRaceImports = map[string]bool{
	"sync": true, "sync/atomic": true, "os/exec": true, "os/signal": true, "net/http": true,
	"net/http/httptest": true, "net/rpc": true, "database/sql": true, "golang.org/x/sync/errgroup": true,
	"golang.org/x/sync/semaphore": true, "golang.org/x/sync/singleflight": true,
}

// netConnRE matches the net package's names that open a connection or
// ask a resolver (which may run goroutines of their own).
var netConnRE = regexp.MustCompile(`^(Listen|Dial|Lookup|FileConn|FileListener|Pipe)|Resolver$`)

// goroutineCalls are the methods and functions that run a function on
// another goroutine (or, t.Parallel, tests beside each other).
var goroutineCalls = map[string]bool{"Parallel": true, "RunParallel": true, "Go": true, "AfterFunc": true}

// concurrencyIn lists what may start a goroutine in the package at
// root/rel (a path such as ./internal/whatif) and in the module packages
// its code imports.
func concurrencyIn(root, rel string) ([]string, error) {
	var problems []string
	fset := token.NewFileSet()
	own, err := parseDir(fset, filepath.Join(root, filepath.FromSlash(rel)), true)
	if err != nil {
		return nil, err
	}
	if len(own) == 0 {
		return nil, fmt.Errorf("no Go files in %s", rel)
	}
	codeImports := map[string]bool{}
	testImports := map[string][]*ast.File{}
	for _, f := range own {
		isTest := strings.HasSuffix(fset.Position(f.Pos()).Filename, "_test.go")
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if noRaceImports[path] {
				problems = append(problems, fmt.Sprintf("%s imports %q", relPos(root, fset, imp.Pos()), path))
			}
			if dep, ok := strings.CutPrefix(path, modulePath+"/"); ok && "./"+dep != rel {
				if isTest {
					testImports[dep] = append(testImports[dep], f)
				} else {
					codeImports[dep] = true
				}
			}
		}
		problems = append(problems, goroutinesIn(root, fset, f)...)
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "net" && netConnRE.MatchString(sel.Sel.Name) {
					problems = append(problems, fmt.Sprintf("%s uses net.%s", relPos(root, fset, sel.Pos()), sel.Sel.Name))
				}
			}
			return true
		})
	}
	// The module packages the code imports, directly or not: their
	// non-test files.
	seen := map[string]bool{}
	found, err := goroutinesBelow(root, fset, sortedKeys(codeImports), seen)
	if err != nil {
		return nil, err
	}
	problems = append(problems, found...)
	// A module package only the tests import: read the same way; if it
	// starts goroutines somewhere, its constants alone.
	for _, dep := range sortedKeys(testImports) {
		if seen[dep] {
			continue
		}
		below, err := goroutinesBelow(root, fset, []string{dep}, map[string]bool{})
		if err != nil {
			return nil, err
		}
		if len(below) == 0 {
			continue
		}
		files, err := parseDir(fset, filepath.Join(root, filepath.FromSlash(dep)), false)
		if err != nil {
			return nil, err
		}
		consts := map[string]bool{}
		name := filepath.Base(dep)
		for _, f := range files {
			name = f.Name.Name
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
					for _, s := range g.Specs {
						for _, id := range s.(*ast.ValueSpec).Names {
							consts[id.Name] = true
						}
					}
				}
			}
		}
		for _, f := range testImports[dep] {
			local := name
			for _, imp := range f.Imports {
				if path, _ := strconv.Unquote(imp.Path.Value); path == modulePath+"/"+dep && imp.Name != nil {
					local = imp.Name.Name
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && !consts[sel.Sel.Name] {
						problems = append(problems, fmt.Sprintf("%s uses %s.%s, not a constant, and %s starts goroutines (%s; its tests may use such a package for its constants only)",
							relPos(root, fset, sel.Pos()), local, sel.Sel.Name, dep, below[0]))
					}
				}
				return true
			})
		}
	}
	return problems, nil
}

// goroutinesBelow lists what starts a goroutine in the non-test files of
// the module packages deps and of those they import, directly or not,
// skipping (and adding to) seen.
func goroutinesBelow(root string, fset *token.FileSet, deps []string, seen map[string]bool) ([]string, error) {
	var problems []string
	queue := deps
	for len(queue) > 0 {
		dep := queue[0]
		queue = queue[1:]
		if seen[dep] {
			continue
		}
		seen[dep] = true
		files, err := parseDir(fset, filepath.Join(root, filepath.FromSlash(dep)), false)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			problems = append(problems, goroutinesIn(root, fset, f)...)
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if next, ok := strings.CutPrefix(path, modulePath+"/"); ok {
					queue = append(queue, next)
				}
			}
		}
	}
	return problems, nil
}

// goroutinesIn lists f's go statements and calls that run a function on
// another goroutine.
func goroutinesIn(root string, fset *token.FileSet, f *ast.File) []string {
	var problems []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			problems = append(problems, fmt.Sprintf("%s has a go statement", relPos(root, fset, n.Pos())))
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && goroutineCalls[sel.Sel.Name] {
				what := sel.Sel.Name
				if id, ok := sel.X.(*ast.Ident); ok {
					what = id.Name + "." + what
				}
				problems = append(problems, fmt.Sprintf("%s calls %s", relPos(root, fset, n.Pos()), what))
			}
		}
		return true
	})
	return problems
}

// parseDir parses the .go files of dir, its _test.go files too if tests.
func parseDir(fset *token.FileSet, dir string, tests bool) ([]*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range names {
		if !tests && strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func relPos(root string, fset *token.FileSet, pos token.Pos) string {
	p := fset.Position(pos)
	if r, err := filepath.Rel(root, p.Filename); err == nil {
		p.Filename = filepath.ToSlash(r)
	}
	return fmt.Sprintf("%s:%d", p.Filename, p.Line)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
