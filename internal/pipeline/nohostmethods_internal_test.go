package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestNoHostMethodValues: what the stages, the backends and the Host's
// helpers are given is named explicitly (issue 21, end state 5), never a
// method value of the Host (h.state passed as a function holds the whole
// Host, and TestBackendsHoldNoHost's walk cannot look into a function).
// It type-checks this package's source (its files for this platform, not
// the tests) and finds every selector whose selection is a method value
// of a method declared on Host or *Host, whatever the expression it is
// taken through (the receiver, another variable, a field, a call's
// result, a struct embedding the Host), that is not the function of a
// call. The test names each method value it finds and where.
//
// A method expression ((*Host).state) is not a method value: it holds no
// Host, and the Host it is called with is named where it is called. A
// method promoted from a field the Host embeds (stateHolder's) binds that
// field, not the Host, and is not flagged.
func TestNoHostMethodValues(t *testing.T) {
	fset, files, info, host := typeCheckPipeline(t)
	var found []string
	calls := 0
	for _, f := range files {
		called := map[*ast.SelectorExpr]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if sel, ok := ast.Unparen(c.Fun).(*ast.SelectorExpr); ok {
					called[sel] = true
				}
			}
			return true
		})
		// where is the function (or method) a position is in, for the
		// message.
		where := func(pos token.Pos) string {
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Pos() <= pos && pos < fn.End() {
					return fn.Name.Name
				}
			}
			return "a package-level declaration"
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			s, ok := info.Selections[sel]
			if !ok || s.Kind() != types.MethodVal || !declaredOn(s.Obj(), host) {
				return true
			}
			if called[sel] {
				calls++
				return true
			}
			found = append(found, fset.Position(sel.Pos()).String()+": "+types.ExprString(sel)+" (the method "+s.Obj().Name()+" of *Host, in "+where(sel.Pos())+")")
			return true
		})
	}
	// The package calls the Host's methods in many places (28 when this
	// was written): none seen means the selections were not recorded and
	// the test proves nothing.
	if calls == 0 {
		t.Fatal("the type-check saw no call of the Host's methods: it is wrong")
	}
	t.Logf("%d calls of the Host's methods in %d files, %d method values", calls, len(files), len(found))
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("a method value of the Host is handed on: %s; give what it needs instead (a field, a value of its own)", f)
	}
}

// declaredOn reports whether obj is a method whose receiver is named
// (or points to) the type host.
func declaredOn(obj types.Object, host *types.TypeName) bool {
	fn, ok := obj.(*types.Func)
	if !ok {
		return false
	}
	recv := fn.Signature().Recv()
	if recv == nil {
		return false
	}
	typ := recv.Type()
	if p, ok := typ.(*types.Pointer); ok {
		typ = p.Elem()
	}
	named, ok := typ.(*types.Named)
	return ok && named.Obj() == host
}

// listedPackage is what typeCheckPipeline reads of go list's output.
type listedPackage struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Module     *struct{ GoVersion string }
}

// goList runs go list -json with args, in this package's directory.
func goList(t *testing.T, args ...string) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Dir,Export,GoFiles,CgoFiles,Imports,Module"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	var pkgs []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
}

// typeCheckPipeline parses this package's files (not its tests) and
// type-checks them against its dependencies' export data, which go list
// -export compiles (-trimpath, as make lint's vet and staticcheck build
// them: the build cache already holds them). It returns the files, their
// types.Info (selections recorded) and the Host's type name; any error of
// the type-check fails the test.
func typeCheckPipeline(t *testing.T) (*token.FileSet, []*ast.File, *types.Info, *types.TypeName) {
	t.Helper()
	self := goList(t, ".")
	if len(self) != 1 {
		t.Fatalf("go list . listed %d packages", len(self))
	}
	pkg := self[0]
	if len(pkg.CgoFiles) > 0 {
		t.Fatalf("cgo files %v are not type-checked here: the test would not see them", pkg.CgoFiles)
	}
	exports := map[string]string{}
	for _, p := range goList(t, append([]string{"-export", "-trimpath", "-deps"}, pkg.Imports...)...) {
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		src, err := os.ReadFile(filepath.Join(pkg.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var typeErrs []string
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
			file, ok := exports[path]
			if !ok || file == "" {
				return nil, errors.New("no export data for " + path)
			}
			return os.Open(file)
		}),
		Error: func(err error) { typeErrs = append(typeErrs, err.Error()) },
	}
	if pkg.Module != nil && pkg.Module.GoVersion != "" {
		conf.GoVersion = "go" + pkg.Module.GoVersion
	}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	checked, _ := conf.Check(pkg.ImportPath, fset, files, info)
	if len(typeErrs) > 0 {
		t.Fatalf("type-checking %s: %d errors, the first: %s", pkg.ImportPath, len(typeErrs), strings.Join(typeErrs[:min(5, len(typeErrs))], "\n"))
	}
	host, ok := checked.Scope().Lookup("Host").(*types.TypeName)
	if !ok {
		t.Fatal("no type Host in the package")
	}
	return fset, files, info, host
}
