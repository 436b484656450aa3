package testkit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureNamesEveryPackage keeps ARCHITECTURE.md's package map
// true (issue 21): every package of the module (go list ./...) is named in
// the map (the fenced block of its "## Packages" section) by its path from
// the module root, the root package as "maiden (root)", so a package added
// without a line saying what it owns fails here, naming it. And every path
// the map names under one of the repository's top-level directories exists,
// so a package (or file) removed or renamed does not linger in it.
// bench/compare is its own module (go list ./... does not reach it), so its
// packages are not checked.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	root := RepoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	block, err := packageMap(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, tok := range pathTokenRE.FindAllString(block, -1) {
		named[strings.TrimRight(tok, "./")] = true
	}

	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	module := modulePath
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the test is not looking at the module", len(pkgs))
	}
	for _, p := range pkgs {
		if p == module {
			if !strings.Contains(block, "maiden (root)") {
				t.Errorf(`ARCHITECTURE.md's package map does not name the root package ("maiden (root)")`)
			}
			continue
		}
		rel := strings.TrimPrefix(p, module+"/")
		if !named[rel] {
			t.Errorf("ARCHITECTURE.md's package map does not name package %s: add a line saying what it owns", rel)
		}
	}

	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for tok := range named {
		first, _, nested := strings.Cut(tok, "/")
		if !nested || !hasDir(top, first) {
			continue // not a path in the repository (a ratio, "http/protobuf", ...)
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(tok))); err != nil {
			t.Errorf("ARCHITECTURE.md's package map names %s, which does not exist: %v", tok, err)
		}
	}
}

// pathTokenRE is a run of the characters a path in the repository is made
// of; "internal/pipeline's" yields internal/pipeline.
var pathTokenRE = regexp.MustCompile(`[A-Za-z0-9_./-]+`)

// packageMap is the fenced block of ARCHITECTURE.md's "## Packages" section.
func packageMap(doc string) (string, error) {
	_, sec, ok := strings.Cut(doc, "\n## Packages\n")
	if !ok {
		return "", errors.New("ARCHITECTURE.md has no \"## Packages\" section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	_, block, ok := strings.Cut(sec, "```\n")
	if !ok {
		return "", errors.New("ARCHITECTURE.md's Packages section has no fenced package map")
	}
	block, _, ok = strings.Cut(block, "\n```")
	if !ok {
		return "", errors.New("ARCHITECTURE.md's package map is not closed")
	}
	return block, nil
}

func hasDir(entries []os.DirEntry, name string) bool {
	for _, e := range entries {
		if e.IsDir() && e.Name() == name {
			return true
		}
	}
	return false
}
