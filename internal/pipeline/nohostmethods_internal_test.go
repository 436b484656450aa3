package pipeline

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestNoHostMethodValues: what the stages, the backends and the Host's
// helpers are given is named explicitly (issue 21, end state 5), never a
// method value of the Host (h.state passed as a function holds the whole
// Host, and TestBackendsHoldNoHost's walk cannot look into a function).
// It reads this package's source: in every method of *Host, a selector
// h.M naming one of the Host's methods must be called, not passed on. The
// test names each method value it finds and where.
func TestNoHostMethodValues(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	methods := map[string]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && hostReceiver(fn) != "" {
				methods[fn.Name.Name] = true
			}
		}
	}
	if len(methods) < 10 {
		t.Fatalf("found %d methods of *Host: the parse is wrong", len(methods))
	}
	var found []string
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			recv := hostReceiver(fn)
			if recv == "" {
				continue
			}
			called := map[*ast.SelectorExpr]bool{}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
						called[sel] = true
					}
				}
				return true
			})
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || called[sel] || !methods[sel.Sel.Name] {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == recv {
					found = append(found, fset.Position(sel.Pos()).String()+": "+recv+"."+sel.Sel.Name+" (in "+fn.Name.Name+")")
				}
				return true
			})
		}
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("a method value of the Host is handed on: %s; give what it needs instead (a field, a value of its own)", f)
	}
}

// hostReceiver is the name of fn's receiver if it is a method of *Host
// (or Host), else "".
func hostReceiver(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) != 1 {
		return ""
	}
	r := fn.Recv.List[0]
	typ := r.Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if id, ok := typ.(*ast.Ident); !ok || id.Name != "Host" {
		return ""
	}
	if len(r.Names) == 0 {
		return "_"
	}
	return r.Names[0].Name
}
