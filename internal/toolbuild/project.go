package toolbuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/maiden-run/maiden/internal/atomicfile"
)

// Lang is the source language of a tool project.
type Lang string

// Languages maiden builds.
const (
	LangJS  Lang = "js"  // one ES module, index.js
	LangWAT Lang = "wat" // a core module in WAT implementing the canonical ABI
	LangGo  Lang = "go"  // a Go package main using the maiden SDK (sdk/go)
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
	Name string
	Lang Lang
	// Source is the main source file (absolute); for Go, the package
	// directory, which is Dir.
	Source string
}

// DefaultOutput is where Build writes the component unless told otherwise:
// NAME.wasm in the project directory.
func (p Project) DefaultOutput() string { return filepath.Join(p.Dir, p.Name+".wasm") }

// DetectProject finds the tool source at path: a directory containing
// go.mod (Go), index.js (JavaScript), tool.wat (WAT) or, failing those, Go
// files (a package main inside an enclosing module, like the repository's
// examples), in that order; or one .js, .wat or .go file (Go builds the
// file's whole directory).
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
		case ".go":
			p.Lang, p.Name, p.Source = LangGo, filepath.Base(p.Dir), p.Dir
		default:
			return Project{}, fmt.Errorf("%w: %s is not JavaScript (.js), WAT (.wat) or Go (.go)", ErrNoProject, path)
		}
		return p, nil
	}
	p := Project{Dir: abs, Name: filepath.Base(abs)}
	for _, c := range []struct {
		file string
		lang Lang
	}{{"go.mod", LangGo}, {"index.js", LangJS}, {"tool.wat", LangWAT}} {
		if _, err := os.Stat(filepath.Join(abs, c.file)); err == nil {
			p.Lang, p.Source = c.lang, filepath.Join(abs, c.file)
			if c.lang == LangGo {
				p.Source = abs
			}
			return p, nil
		}
	}
	if goFiles, _ := filepath.Glob(filepath.Join(abs, "*.go")); len(goFiles) > 0 {
		p.Lang, p.Source = LangGo, abs
		return p, nil
	}
	return Project{}, fmt.Errorf("%w in %s: expected go.mod or .go files (Go), index.js (JavaScript) or tool.wat (WAT); `maiden new go NAME` or `maiden new js NAME` creates a project", ErrNoProject, path)
}

// Build compiles the project's source into a component and writes it to out
// atomically (a reader never sees half a file, so a server hot-reloading it
// picks up either the old or the new version).
func (t *Toolchain) Build(ctx context.Context, p Project, out string) error {
	var comp []byte
	var err error
	switch p.Lang {
	case LangGo:
		comp, err = t.buildGo(ctx, p)
	case LangJS, LangWAT:
		var src []byte
		src, err = os.ReadFile(p.Source)
		if err != nil {
			return fmt.Errorf("toolbuild: %w", err)
		}
		if p.Lang == LangJS {
			say(t.progress, "componentize-js %s (this takes 5-15 s)", p.Source)
			comp, err = t.ComponentFromJS(ctx, src)
		} else {
			comp, err = t.ComponentFromWAT(ctx, src)
		}
		err = locate(err, displayDir(p.Source))
	default:
		return fmt.Errorf("toolbuild: unknown language %q", p.Lang)
	}
	if err != nil {
		return err
	}
	if err := atomicfile.Write(out, comp, 0o644); err != nil {
		return fmt.Errorf("toolbuild: write %s: %w", out, err)
	}
	return nil
}
