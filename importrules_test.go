package maiden_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/maiden-run/maiden"

// policyCores decide; they run without a configuration file, a store or a
// host, so the same code can answer from a replayed call. They may import
// each other and the standard library, never config, the store or the root.
var policyCores = []string{
	"internal/grant", "internal/cards", "internal/boundary", "internal/condition", "internal/limits",
	"internal/egress", "internal/netguard", "internal/redact", "internal/hostpattern", "internal/command",
	"internal/mwproto", "internal/regfile", "internal/jsonparse", "internal/jsonschema",
	"internal/decide", "internal/progress", "internal/secret", "internal/whatif",
}

// knownDebt lists imports the rules forbid that are still there, each with
// why; the test fails when one of them is gone (so the list only shrinks)
// and when any import not listed here breaks a rule.
var knownDebt = map[string]string{}

type listed struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

func goList(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the test is not looking at the module", len(pkgs))
	}
	return pkgs
}

func rel(path string) string {
	if path == module {
		return "(root)"
	}
	return strings.TrimPrefix(path, module+"/")
}

// TestImportRules: dependencies point one way. Nothing under internal/
// imports the root (the embedding API) or admin (the operators' API, which
// the root itself uses); admin imports not the root, even indirectly; the
// policy cores import neither config, the store nor the root, even
// indirectly; the CLI imports no store (its operators' commands go through
// admin); only the root imports internal/pipeline, the call path behind
// Host.
// Each violation is named as "package -> import".
func TestImportRules(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	report := func(from, to, rule string) {
		key := rel(from) + " -> " + rel(to)
		if _, ok := knownDebt[key]; ok {
			seen[key] = true
			return
		}
		t.Errorf("%s: %s", key, rule)
	}
	for _, p := range goList(t) {
		name := rel(p.ImportPath)
		if strings.HasPrefix(name, "internal/") {
			for _, imp := range p.Imports {
				if imp == module {
					report(p.ImportPath, imp, "nothing under internal/ imports the root package")
				}
				if imp == module+"/admin" {
					report(p.ImportPath, imp, "nothing under internal/ imports admin, the operators' public API")
				}
			}
		}
		// The call path (internal/pipeline) is the root's body: the root
		// is its only importer, so no other package (a front end, admin,
		// another internal package) reaches around the embedding API.
		if name != "(root)" && name != "internal/pipeline" {
			for _, imp := range p.Imports {
				if imp == module+"/internal/pipeline" {
					report(p.ImportPath, imp, "only the root imports internal/pipeline, the call path behind Host")
				}
			}
		}
		if name == "admin" {
			for _, dep := range p.Deps {
				if dep == module || dep == module+"/mcpserver" {
					report(p.ImportPath, dep, "admin sits below the root (the Host serves the inbox and built-ins through it): it imports neither the root nor a front end, even indirectly")
				}
			}
		}
		if slices.Contains(policyCores, name) {
			for _, dep := range p.Deps {
				if dep == module || dep == module+"/config" || dep == module+"/internal/store" {
					report(p.ImportPath, dep, "a policy core imports neither config, the store nor the root, even indirectly")
				}
			}
		}
		if name == "cmd/maiden" {
			// Its tests too: they read what operators see through admin,
			// and plant what only calls write through internal/statetest.
			for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
				if imp == module+"/internal/store" {
					report(p.ImportPath, imp, "the CLI reaches the store through the operators' API (admin), not directly")
				}
			}
		}
	}
	for key := range knownDebt {
		if !seen[key] {
			t.Errorf("%s is listed as known debt but no longer happens: remove it from knownDebt", key)
		}
	}
}

// TestPolicyCoresExist keeps the list above honest: a renamed or removed
// core would otherwise silently drop out of the rule.
func TestPolicyCoresExist(t *testing.T) {
	t.Parallel()
	have := map[string]bool{}
	for _, p := range goList(t) {
		have[rel(p.ImportPath)] = true
	}
	for _, c := range policyCores {
		if !have[c] {
			t.Errorf("policy core %s is not a package of the module", c)
		}
	}
}

// rootSurfaceDebt lists exported names of the public packages whose
// signatures still name an internal package (issue 21: an embedder cannot
// call them), as "dir: name" for a package other than the root. The test
// fails on any other such name and when a listed one is fixed.
var rootSurfaceDebt = []string{}

// publicSurfaces are the packages an embedder imports beside the root:
// the operators' API and the shared vocabulary.
var publicSurfaces = []string{".", "admin", "api"}

// TestRootSurfaceNamesNoInternalPackage: the root is the embedding API, and
// admin and api are public beside it, so no exported declaration's type or
// signature names a package under internal/ (go doc -all would show it, and
// no embedder could use it).
func TestRootSurfaceNamesNoInternalPackage(t *testing.T) {
	t.Parallel()
	var found []string
	for _, dir := range publicSurfaces {
		names := surfaceNamingInternal(t, dir)
		if dir != "." {
			for i, n := range names {
				names[i] = dir + ": " + n
			}
		}
		// Keep the test honest: a moved package would check nothing.
		if m, _ := filepath.Glob(filepath.Join(dir, "*.go")); len(m) == 0 {
			t.Errorf("public package %s has no Go files", dir)
		}
		found = append(found, names...)
	}
	slices.Sort(found)
	found = slices.Compact(found)
	for _, n := range found {
		if !slices.Contains(rootSurfaceDebt, n) {
			t.Errorf("exported %s names an internal package in its declaration; an embedder cannot use it", n)
		}
	}
	for _, n := range rootSurfaceDebt {
		if !slices.Contains(found, n) {
			t.Errorf("%s no longer names an internal package: remove it from rootSurfaceDebt", n)
		}
	}
}

// surfaceNamingInternal lists the exported names of the package in dir
// whose declarations name a package under internal/.
func surfaceNamingInternal(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]string{} // local name -> import path
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(path, module+"/internal/") {
				continue
			}
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			internal[name] = path
		}
		names := func(n ast.Node) bool {
			hit := false
			ast.Inspect(n, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] != "" {
						hit = true
					}
				}
				return !hit
			})
			return hit
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				name := d.Name.Name
				if d.Recv != nil {
					recv := d.Recv.List[0].Type
					if star, ok := recv.(*ast.StarExpr); ok {
						recv = star.X
					}
					id, ok := recv.(*ast.Ident)
					if !ok || !id.IsExported() {
						continue
					}
					name = id.Name + "." + name
				}
				if names(d.Type) {
					found = append(found, name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						// Exported fields and methods of an exported type only.
						hit := false
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, f := range st.Fields.List {
								exported := len(f.Names) == 0
								for _, n := range f.Names {
									exported = exported || n.IsExported()
								}
								hit = hit || (exported && names(f.Type))
							}
						} else {
							hit = names(s.Type)
						}
						if hit {
							found = append(found, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							// A value's type matters, not the expression that
							// computes it (WasmtimeVersion = wasmtime.Version
							// is a string).
							if s.Type != nil && names(s.Type) {
								found = append(found, n.Name)
							}
						}
					}
				}
			}
		}
	}
	return found
}
