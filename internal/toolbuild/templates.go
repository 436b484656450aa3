package toolbuild

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/maiden-run/maiden/internal/atomicfile"
	sdk "github.com/maiden-run/maiden/sdk/go"
	"github.com/maiden-run/maiden/wit"
)

// templatesFS holds the project templates, one directory per language.
// Files ending in .tmpl are written without the suffix and with every
// "{{.Name}}" replaced by the tool's name (plain replacement, not
// text/template: the READMEs show Go code full of braces); a leading "gitignore" becomes ".gitignore"
// (a file named .gitignore would be skipped by go:embed). The rest is
// copied as is: templates/go/main.go is real Go that the repository's own
// `go vet` and `go test` check.
//
//go:embed templates
var templatesFS embed.FS

// ErrProjectExists means NewProject's target directory exists and is not
// empty.
var ErrProjectExists = errors.New("directory exists and is not empty")

// ErrBadName means a project name cannot be a tool name in agent.toml.
var ErrBadName = errors.New("invalid tool name")

// toolNameRE mirrors agent.toml's rule for tool names (package config).
var toolNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

type templateData struct {
	Name string
}

// Templates lists the languages NewProject supports.
var Templates = []Lang{LangGo, LangJS}

// TemplateCommandJS is the JavaScript template of a tool that takes
// commands: its schema() is a command tree (a command description,
// docs/command-model.md) and its execute gets the validated call.
const TemplateCommandJS Lang = "js-command"

// ToolTemplates lists the tool templates NewProject supports: Templates
// and TemplateCommandJS.
var ToolTemplates = []Lang{LangGo, LangJS, TemplateCommandJS}

// Middleware templates: NewProject takes them where it takes a language.
// The project is a Go or JS project whose source is a middleware
// (maiden:middleware@0.1.0) instead of a tool; maiden build tells them
// apart by their exports.
const (
	TemplateMiddlewareGo Lang = "middleware-go"
	TemplateMiddlewareJS Lang = "middleware-js"
)

// MiddlewareTemplates lists the middleware templates NewProject supports.
var MiddlewareTemplates = []Lang{TemplateMiddlewareGo, TemplateMiddlewareJS}

// IsMiddlewareTemplate tells whether a NewProject template makes a
// middleware.
func IsMiddlewareTemplate(t Lang) bool {
	return t == TemplateMiddlewareGo || t == TemplateMiddlewareJS
}

// templateLang is the language of a template's project.
func templateLang(t Lang) Lang {
	switch t {
	case TemplateMiddlewareGo:
		return LangGo
	case TemplateMiddlewareJS, TemplateCommandJS:
		return LangJS
	}
	return t
}

// TemplateLang is the language of a NewProject template's project.
func TemplateLang(t Lang) Lang { return templateLang(t) }

// NewProject creates a tool project for lang in dir (created if missing;
// lang may also be TemplateCommandJS, a JS tool that takes commands, or a
// middleware template, TemplateMiddlewareGo or
// TemplateMiddlewareJS, which make a middleware project with
// wit/maiden-middleware.wit;
// refused with ErrProjectExists if it has any file). The tool is named after
// dir's base name, which must be a valid agent.toml tool name. Every project
// gets the source, a README, a .gitignore and a copy of the WIT contract
// (wit/maiden-tool.wit); a Go project also gets a copy of the SDK in sdk/
// that its go.mod points at, so it builds with nothing but the Go toolchain.
// It returns the project as DetectProject would find it and the files
// written, relative to dir.
func NewProject(dir string, lang Lang) (Project, []string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Project{}, nil, err
	}
	name := filepath.Base(abs)
	if !toolNameRE.MatchString(name) {
		return Project{}, nil, fmt.Errorf("%w %q: a tool name is 1 to 64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit", ErrBadName, name)
	}
	files, err := templateFiles(lang, templateData{Name: name})
	if err != nil {
		return Project{}, nil, err
	}
	root, err := openProjectDir(abs, dir)
	if err != nil {
		return Project{}, nil, err
	}
	defer root.Close()
	written, err := writeProject(root, files)
	if err != nil {
		return Project{}, written, fmt.Errorf("%s: %w", dir, err)
	}
	p, err := DetectProject(abs)
	return p, written, err
}

// openProjectDir opens the directory a new project is written into: abs,
// made here if missing, else one that is ours and empty. A directory
// someone else owns (made in /tmp before us, say) can change while the
// files are written: a symlink planted at one of their names would have
// the write land on any file of ours. One that cannot be listed is not
// taken for empty.
func openProjectDir(abs, dir string) (*os.Root, error) {
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, err
	}
	made := os.Mkdir(abs, 0o755) == nil
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: %s cannot be listed (%v)", ErrProjectExists, dir, err)
	}
	fi, err := root.Stat(".")
	if err == nil && !made {
		if uid, other := atomicfile.OwnedByOther(fi); other {
			err = fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d): someone else can change it while maiden writes into it; choose a directory of your own", ErrProjectExists, dir, uid, os.Geteuid())
		}
	}
	if err == nil {
		err = emptyDir(root, dir)
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}

// emptyDir is nil if root holds nothing, and ErrProjectExists otherwise,
// also when it cannot be listed (deny by default).
func emptyDir(root *os.Root, dir string) error {
	d, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("%w: %s cannot be listed (%v)", ErrProjectExists, dir, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	switch {
	case len(names) > 0:
		return fmt.Errorf("%w: %s", ErrProjectExists, dir)
	case err != nil && !errors.Is(err, io.EOF):
		return fmt.Errorf("%w: %s cannot be listed (%v)", ErrProjectExists, dir, err)
	}
	return nil
}

// writeProject writes files into root, each a new file: nothing already
// there is overwritten, and no symlink is followed out of root or into a
// file (os.Root; O_EXCL).
func writeProject(root *os.Root, files []projectFile) ([]string, error) {
	var written []string
	for _, f := range files {
		p := filepath.FromSlash(f.path)
		if d := filepath.Dir(p); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return written, err
			}
		}
		w, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return written, err
		}
		_, err = w.Write(f.data)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return written, err
		}
		written = append(written, f.path)
	}
	return written, nil
}

type projectFile struct {
	path string // slash-separated, relative to the project
	data []byte
}

// templateFiles renders lang's template plus the shared files.
func templateFiles(lang Lang, data templateData) ([]projectFile, error) {
	root := "templates/" + string(lang)
	if _, err := fs.Stat(templatesFS, root); err != nil {
		var names []string
		for _, l := range append(append([]Lang(nil), ToolTemplates...), MiddlewareTemplates...) {
			names = append(names, string(l))
		}
		return nil, fmt.Errorf("no template for %q (have: %s)", lang, strings.Join(names, ", "))
	}
	var files []projectFile
	err := fs.WalkDir(templatesFS, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := templatesFS.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, root+"/")
		if strings.HasSuffix(rel, ".tmpl") {
			rel = strings.TrimSuffix(rel, ".tmpl")
			b = bytes.ReplaceAll(b, []byte("{{.Name}}"), []byte(data.Name))
		}
		if base := path.Base(rel); base == "gitignore" {
			rel = path.Join(path.Dir(rel), ".gitignore")
		}
		files = append(files, projectFile{path: path.Clean(rel), data: b})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rendering the %s template: %w", lang, err)
	}
	if IsMiddlewareTemplate(lang) {
		files = append(files, projectFile{path: "wit/maiden-middleware.wit", data: []byte(wit.Middleware.Text)})
	} else {
		files = append(files, projectFile{path: "wit/maiden-tool.wit", data: []byte(wit.Tool)})
	}
	if templateLang(lang) == LangGo {
		sdkFiles, err := sdkCopy()
		if err != nil {
			return nil, err
		}
		files = append(files, sdkFiles...)
	}
	return files, nil
}

// SDKModule is the module path of the vendored SDK copy, equal to the SDK's
// import path inside the maiden module so that tool code is the same in
// both places.
const SDKModule = "github.com/maiden-run/maiden/sdk/go"

// sdkCopy is the SDK's source as a module of its own, for sdk/ in a Go
// project.
func sdkCopy() ([]projectFile, error) {
	entries, err := sdk.Source.ReadDir(".")
	if err != nil {
		return nil, err
	}
	files := []projectFile{{
		path: "sdk/go.mod",
		data: []byte("// A copy of maiden's Go SDK, written by `maiden new go`.\nmodule " + SDKModule + "\n\ngo 1.26\n"),
	}}
	for _, e := range entries {
		b, err := sdk.Source.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		files = append(files, projectFile{path: "sdk/" + e.Name(), data: b})
	}
	return files, nil
}
