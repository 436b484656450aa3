package toolbuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Lang is the source language of a tool project.
type Lang string

// Languages maiden builds.
const (
	LangJS  Lang = "js"  // one ES module, index.js
	LangWAT Lang = "wat" // a core module in WAT implementing the canonical ABI
)

// ErrNoProject means a directory holds no tool source maiden knows how to
// build.
var ErrNoProject = errors.New("no tool source found")

// Project is a tool's source, found on disk.
type Project struct {
	// Dir is the project directory (absolute).
	Dir string
	// Name is the tool's name: the directory's base name, or the source
	// file's stem when a single file was given.
	Name   string
	Lang   Lang
	Source string // the main source file (absolute)
}

// DefaultOutput is where Build writes the component unless told otherwise:
// NAME.wasm in the project directory.
func (p Project) DefaultOutput() string { return filepath.Join(p.Dir, p.Name+".wasm") }

// DetectProject finds the tool source at path: a directory containing
// index.js (JavaScript) or tool.wat (WAT), or one .js or .wat file.
func DetectProject(path string) (Project, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Project{}, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return Project{}, fmt.Errorf("%w: %v", ErrNoProject, err)
	}
	if !fi.IsDir() {
		ext := filepath.Ext(abs)
		p := Project{Dir: filepath.Dir(abs), Name: strings.TrimSuffix(filepath.Base(abs), ext), Source: abs}
		switch ext {
		case ".js", ".mjs":
			p.Lang = LangJS
		case ".wat":
			p.Lang = LangWAT
		default:
			return Project{}, fmt.Errorf("%w: %s is neither JavaScript (.js) nor WAT (.wat)", ErrNoProject, path)
		}
		return p, nil
	}
	p := Project{Dir: abs, Name: filepath.Base(abs)}
	for _, c := range []struct {
		file string
		lang Lang
	}{{"index.js", LangJS}, {"tool.wat", LangWAT}} {
		if _, err := os.Stat(filepath.Join(abs, c.file)); err == nil {
			p.Lang, p.Source = c.lang, filepath.Join(abs, c.file)
			return p, nil
		}
	}
	return Project{}, fmt.Errorf("%w in %s: expected index.js (JavaScript) or tool.wat (WAT); `maiden new js NAME` creates a project", ErrNoProject, path)
}

// Build compiles the project's source into a component and writes it to out
// atomically (a reader never sees half a file, so a server hot-reloading it
// picks up either the old or the new version).
func (t *Toolchain) Build(ctx context.Context, p Project, out string) error {
	src, err := os.ReadFile(p.Source)
	if err != nil {
		return fmt.Errorf("toolbuild: %w", err)
	}
	var comp []byte
	switch p.Lang {
	case LangJS:
		comp, err = t.ComponentFromJS(ctx, src)
	case LangWAT:
		comp, err = t.ComponentFromWAT(ctx, src)
	default:
		return fmt.Errorf("toolbuild: unknown language %q", p.Lang)
	}
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return fmt.Errorf("toolbuild: %w", err)
	}
	_, werr := tmp.Write(comp)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), out)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("toolbuild: write %s: %w", out, werr)
	}
	return nil
}
