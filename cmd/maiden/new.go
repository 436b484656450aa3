package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/atomicfile"
	"github.com/maiden-run/maiden/internal/safetext"
	"github.com/maiden-run/maiden/internal/toolbuild"
)

const newUsage = "usage: maiden new go|js|js-command|middleware-go|middleware-js DIR [-add | -add=false] [-config agent.toml]   (the tool or middleware is named after DIR's last element)"

const newHelp = `
Creates DIR with the tool's source, a README, a .gitignore and the WIT
contract (a Go tool also gets a copy of the SDK, so it builds offline).
DIR must be missing, or empty and yours; every file is written new (a
symlink or file at its name is refused, never followed).

Then it adds a [tools.NAME] table (path to the .wasm "maiden build DIR"
writes, timeout_ms, memory_mb; network and secrets commented out) to
agent.toml:
  -add, or -config FILE   append it without asking (creating the file if
                          it does not exist)
  -add=false              never; print the table to paste instead
  neither                 ask, if agent.toml exists and stdin is a terminal;
                          otherwise print the table
agent.toml is never rewritten otherwise: a table of that name already
there, or a file that does not parse, is left alone (and with -add or
-config, refused before anything is created).

js-command creates a JavaScript tool that takes commands, like a CLI: its
schema() is a command tree (docs/command-model.md), so agents' cards can
allow one command and not another, and maiden help TOOL COMMAND works.

middleware-go and middleware-js create an operator middleware instead (a
component that passes, rejects or rewrites tool calls; see the project's
README.md). agent.toml is not changed for them: maiden new prints the
[middleware.NAME] table and a [[middleware]] entry to paste, and refuses
-add.`

// addFlag is -add: unset (ask), -add (yes) or -add=false (no).
type addFlag struct{ set, yes bool }

func (a *addFlag) String() string {
	if !a.set {
		return ""
	}
	return strconv.FormatBool(a.yes)
}

func (a *addFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	a.set, a.yes = true, v
	return nil
}

func (a *addFlag) IsBoolFlag() bool { return true }

func completeNew(i int, _ map[string]string) completion {
	if i == 1 {
		return completion{kind: completeDirs}
	}
	return choices(string(toolbuild.LangGo), string(toolbuild.LangJS), string(toolbuild.TemplateCommandJS), string(toolbuild.TemplateMiddlewareGo), string(toolbuild.TemplateMiddlewareJS))(i, nil)
}

// cmdNew creates a tool project from a template, adds it to agent.toml
// (if asked, or on a yes at the prompt) and says how to build and call it.
func cmdNew(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("new", stderr)
	var add addFlag
	fs.Var(&add, "add", "append the tool's table to agent.toml (or the -config file) without asking; -add=false: never (default: ask, on a terminal)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 2 {
		fmt.Fprintln(stderr, newUsage)
		return exitUsage
	}
	lang, dir := toolbuild.Lang(pos[0]), pos[1]
	if lang == "javascript" {
		lang = toolbuild.LangJS
	}
	if toolbuild.IsMiddlewareTemplate(lang) {
		return newMiddleware(lang, pos[1], add, stdout, stderr)
	}
	if lang != toolbuild.LangGo && lang != toolbuild.LangJS && lang != toolbuild.TemplateCommandJS {
		fmt.Fprintf(stderr, "maiden new: unknown language %q\n%s\n", pos[0], newUsage)
		return exitUsage
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		fmt.Fprintln(stderr, "maiden new:", err)
		return exitUsage
	}
	never := add.set && !add.yes
	explicit := !never && (add.yes || flagGiven(fs, "config"))
	memory := 64
	if toolbuild.TemplateLang(lang) == toolbuild.LangJS {
		memory = 128 // the JS engine's heap
	}
	// The tool's name is DIR's base name (NewProject checks it).
	name := filepath.Base(absDir)
	cfg := c.config
	table := toolTable(name, wasmPathFrom(cfg, filepath.Join(absDir, name+".wasm")), memory)

	// Look at agent.toml before creating anything, so that a request to
	// add that cannot be honoured fails with nothing half done.
	st := inspectAgentTOML(cfg, name, table)
	if explicit && st.problem != "" {
		fmt.Fprintf(stderr, "maiden new: %s; nothing was created (add the tool by hand, or pass -add=false)\n", st.problem)
		return exitUsage
	}

	p, files, err := toolbuild.NewProject(dir, lang)
	if err != nil {
		fmt.Fprintln(stderr, "maiden new:", err)
		if errors.Is(err, toolbuild.ErrBadName) || errors.Is(err, toolbuild.ErrProjectExists) {
			return exitUsage
		}
		return exitTrap
	}
	fmt.Fprintf(stdout, "created %s, a %s tool named %s:\n", dir, langNames[p.Lang], p.Name)
	sdkFiles := 0
	for _, f := range files {
		if strings.HasPrefix(f, "sdk/") {
			sdkFiles++
			continue
		}
		fmt.Fprintf(stdout, "  %s\n", f)
	}
	if sdkFiles > 0 {
		fmt.Fprintf(stdout, "  sdk/  (%d files: a copy of maiden's Go SDK, see README.md)\n", sdkFiles)
	}

	example := `{"message":"hi","shout":true}`
	if lang == toolbuild.TemplateCommandJS {
		example = `{"command":"count","unit":"chars","text":"hello"}`
	}
	// The call line that works once the tool is in agent.toml: -config
	// only when it is not the default one.
	callLine := fmt.Sprintf("maiden call %s '%s'", p.Name, example)
	if cfg != "agent.toml" {
		callLine = fmt.Sprintf("maiden call -config %s %s '%s'", cfg, p.Name, example)
	}
	next := func() {
		fmt.Fprintf(stdout, "\nnext:\n  maiden build %s\n  %s\n", dir, callLine)
	}
	paste := func(why string) int {
		fmt.Fprintf(stdout, "\nnext:\n  maiden build %s\n", dir)
		fmt.Fprintf(stdout, "\n%s\n(path is relative to %s's directory)\n\n%s", why, cfg, table)
		fmt.Fprintf(stdout, "\nthen:\n  %s\n", callLine)
		return exitOK
	}

	switch {
	case never:
		return paste("add it to agent.toml:")
	case explicit:
	case !st.exists:
		return paste(fmt.Sprintf("add it to agent.toml (there is no %s here: save this as %s, with the line version = 1 above it):", cfg, cfg))
	case st.problem != "":
		fmt.Fprintf(stderr, "maiden new: not offering to add the tool to %s: %s\n", cfg, st.problem)
		return paste("add it to agent.toml:")
	case !isTerminal(stdin):
		return paste(fmt.Sprintf("add it to %s (or run maiden new with -add to append it):", cfg))
	default:
		fmt.Fprintf(stderr, "\nadd [tools.%s] to %s? [Y/n] ", p.Name, cfg)
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); (err != nil && a == "") || (a != "" && a != "y" && a != "yes") {
			return paste("not added; to add it yourself:")
		}
	}

	created, err := appendToolTable(cfg, p.Name, table)
	if err != nil {
		fmt.Fprintf(stderr, "maiden new: %v\n", err)
		paste("add it to agent.toml by hand:")
		return exitUsage
	}
	verb := "added to"
	if created {
		verb = "created"
	}
	fmt.Fprintf(stdout, "\n%s %s:\n\n%s", verb, cfg, table)
	fmt.Fprintf(stdout, "(until it is built, maiden check reports the path as missing)\n")
	next()
	return exitOK
}

// newMiddleware creates a middleware project from a template and prints
// the agent.toml lines that use it. It never edits agent.toml: a
// middleware is declared ([middleware.NAME]) and placed in a chain
// ([[middleware]] or a tool's middleware list), and where it belongs in the
// chain is the operator's decision.
func newMiddleware(tmpl toolbuild.Lang, dir string, add addFlag, stdout, stderr io.Writer) int {
	if add.set && add.yes {
		fmt.Fprintln(stderr, "maiden new: -add adds tools only; a middleware's place in the chain is yours to choose (maiden new prints the lines to paste); nothing was created")
		return exitUsage
	}
	p, files, err := toolbuild.NewProject(dir, tmpl)
	if err != nil {
		fmt.Fprintln(stderr, "maiden new:", err)
		if errors.Is(err, toolbuild.ErrBadName) || errors.Is(err, toolbuild.ErrProjectExists) {
			return exitUsage
		}
		return exitTrap
	}
	fmt.Fprintf(stdout, "created %s, a %s middleware named %s:\n", dir, langNames[p.Lang], p.Name)
	sdkFiles := 0
	for _, f := range files {
		if strings.HasPrefix(f, "sdk/") {
			sdkFiles++
			continue
		}
		fmt.Fprintf(stdout, "  %s\n", f)
	}
	if sdkFiles > 0 {
		fmt.Fprintf(stdout, "  sdk/  (%d files: a copy of maiden's Go SDK, see README.md)\n", sdkFiles)
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		absDir = dir
	}
	fmt.Fprintf(stdout, "\nnext:\n  maiden build %s\n\nthen declare it in agent.toml and put it in a chain (README.md explains the event and the verdicts):\n\n%s", dir,
		middlewareTable(p.Name, filepath.ToSlash(filepath.Join(absDir, p.Name+".wasm")), middlewareMemoryMB(p.Lang)))
	return exitOK
}

// middlewareTable is the agent.toml lines of a new middleware: its
// component table, with the defaults spelled out, and a universal entry
// that runs it on every call.
func middlewareTable(name, path string, memoryMB int) string {
	return fmt.Sprintf(`[middleware.%s]
path = %s
timeout_ms = 1000
memory_mb = %d

[[middleware]]
use = %q
# when = 'tool == "weather"'   # CEL: only the calls it holds for
`, name, tomlString(path), memoryMB, name)
}

// toolTable is the agent.toml table of a new tool, with safe defaults.
func toolTable(name, path string, memory int) string {
	return fmt.Sprintf(`[tools.%s]
path = %s
timeout_ms = 5000
memory_mb = %d
# http_allow = ["api.example.com"]   # hosts it may fetch (https only)
# secrets = ["API_TOKEN"]            # credential names it may ask for; values come from MAIDEN_SECRET_<NAME>
`, name, tomlString(path), memory)
}

// tomlString is s as a TOML basic string. Go's %q writes escapes TOML does
// not have (\a, \v, \x1b), so a path holding such a character (a
// directory of a cloned repository named to drive a terminal) made a file
// that did not parse. Every character safetext would escape (control,
// format and bidirectional characters) is written \uXXXX or \UXXXXXXXX
// here: the same path to TOML, and nothing a terminal acts on when the
// table is printed.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r > 0xffff && safetext.Unsafe(r):
			fmt.Fprintf(&b, `\U%08X`, r)
		case safetext.Unsafe(r):
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// wasmPathFrom is wasm as agent.toml at cfg should name it: relative to
// cfg's directory when it lies beneath it, else absolute.
func wasmPathFrom(cfg, wasm string) string {
	absCfg, err := filepath.Abs(cfg)
	if err != nil {
		return filepath.ToSlash(wasm)
	}
	rel, err := filepath.Rel(filepath.Dir(absCfg), wasm)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(wasm)
	}
	return filepath.ToSlash(rel)
}

type agentTOMLState struct {
	exists  bool
	problem string // why the tool cannot be appended; "" if it can
}

// inspectAgentTOML says whether table (of tool name) can be appended to the
// agent.toml at path: a missing file can be created; an existing one must
// parse as TOML, not have that tool already, and still parse with the
// table appended.
func inspectAgentTOML(path, name, table string) agentTOMLState {
	data, err := config.ReadFile(path, config.MaxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return agentTOMLState{}
	}
	if err != nil {
		return agentTOMLState{exists: true, problem: err.Error()}
	}
	if p := ownedByOther(path, name); p != "" {
		return agentTOMLState{exists: true, problem: p}
	}
	if p := toolClash(path, data, name); p != "" {
		return agentTOMLState{exists: true, problem: p}
	}
	if _, err := appended(path, data, name, table); err != nil {
		return agentTOMLState{exists: true, problem: err.Error()}
	}
	return agentTOMLState{exists: true}
}

// ownedByOther is why the agent.toml at path (through links, to its target)
// cannot take the tool's table because another user owns it ("" if not,
// or if it cannot be told): replacing the file (a rename over it) would
// take it from its owner, as client config -write refuses to.
func ownedByOther(path, name string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	uid, other := atomicfile.OwnedByOther(fi)
	if !other {
		return ""
	}
	return fmt.Sprintf("%s: owned by uid %d, not by you (uid %d): adding [tools.%s] replaces the file, which would take it from its owner (run this as its owner)", path, uid, os.Geteuid(), name)
}

// toolClash is why name cannot be appended to data ("" if it can).
func toolClash(path string, data []byte, name string) string {
	tools, err := tomlTools(data)
	if err != nil {
		return fmt.Sprintf("%s%v", path, err)
	}
	if _, ok := tools[name]; ok {
		where := path
		if line := toolLine(path, data, name); line > 0 {
			where += ":" + strconv.Itoa(line)
		}
		return fmt.Sprintf("%s: [tools.%s] already exists; left as it is (choose another DIR name)", where, name)
	}
	return ""
}

// tomlTools is the tools table of an agent.toml, parsed as TOML only (no
// validation: tools not yet built are fine). Its error starts with
// ":LINE:COL: " when the position is known.
func tomlTools(data []byte) (map[string]any, error) {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf(":%d:%d: does not parse as TOML: %v", row, col, de)
		}
		return nil, fmt.Errorf(": does not parse as TOML: %v", err)
	}
	switch t := doc["tools"].(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return t, nil
	default:
		return nil, fmt.Errorf(": tools is a %T, not a table", t)
	}
}

// toolLine is the line where tools.name is defined, if it can be told.
func toolLine(path string, data []byte, name string) int {
	if cfg, err := config.Parse(path, data, filepath.Dir(path)); err == nil {
		if t, ok := cfg.Tool(name); ok {
			return t.Line
		}
	}
	re := regexp.MustCompile(`^\s*(\[\s*tools\s*\.\s*("` + regexp.QuoteMeta(name) + `"|'` + regexp.QuoteMeta(name) + `'|` + regexp.QuoteMeta(name) + `)\s*[\].]|tools\s*\.\s*"?` + regexp.QuoteMeta(name) + `"?\s*[.=])`)
	for i, l := range strings.Split(string(data), "\n") {
		if re.MatchString(l) {
			return i + 1
		}
	}
	return 0
}

// appendToolTable appends table to the agent.toml at path (created, with
// version = 1, if missing), re-checking just before writing that the tool
// is still absent. The file is replaced atomically (through a symlink, to
// its target), so a running maiden serve never reads half of it.
func appendToolTable(path, name, table string) (created bool, err error) {
	target := path
	if t, err := filepath.EvalSymlinks(path); err == nil {
		target = t
	}
	perm := fs.FileMode(0o644)
	data, err := config.ReadFile(target, config.MaxFileBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		created = true
		data = []byte("version = 1\n")
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return false, err
		}
	case err != nil:
		return false, err
	default:
		if fi, err := os.Stat(target); err == nil {
			perm = fi.Mode().Perm()
		}
		// Checked again here: the file may have changed hands since.
		if p := ownedByOther(path, name); p != "" {
			return false, errors.New(p + "; nothing was written")
		}
		if p := toolClash(path, data, name); p != "" {
			return false, errors.New(p)
		}
	}
	out, err := appended(path, data, name, table)
	if err != nil {
		return false, err
	}
	if err := atomicfile.Write(target, out, perm); err != nil {
		return false, fmt.Errorf("%s: %v", path, err)
	}
	return created, nil
}

// appended is data with table appended, provided the result parses and
// defines the tool: this command never writes a file it broke (an inline
// "tools = {...}" cannot take a [tools.NAME] table, for one).
func appended(path string, data []byte, name, table string) ([]byte, error) {
	out := append([]byte{}, data...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, '\n')
	out = append(out, table...)
	if tools, err := tomlTools(out); err != nil {
		return nil, fmt.Errorf("%s: appending [tools.%s] would make it fail to parse (%s); left unchanged", path, name, strings.TrimPrefix(err.Error(), ": "))
	} else if _, ok := tools[name]; !ok {
		return nil, fmt.Errorf("%s: appending [tools.%s] would not define the tool; left unchanged", path, name)
	}
	return out, nil
}

// isTerminal says whether r is a terminal (then maiden new may ask). A
// variable for tests.
var isTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && fileIsTerminal(f)
}
