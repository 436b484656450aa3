package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/atomicfile"
	"github.com/maiden-run/maiden/mcpserver"
)

// `maiden client config CLIENT` writes the MCP server entry that makes a
// desktop client start maiden (or reach a running maiden over HTTP), in the
// shape that client's file takes:
//
//	Claude Desktop  claude_desktop_config.json  "mcpServers": {NAME: {command, args}}
//	Cursor          ~/.cursor/mcp.json          "mcpServers": {NAME: {command, args} or {url, headers}}
//	VS Code         .vscode/mcp.json            "servers": {NAME: {"type": "stdio", command, args} or {"type": "http", url, headers}}
//
// Paths are absolute (the client starts maiden from a directory of its
// own). A bearer token is never written: Cursor's entry names the
// environment variable (${env:NAME}, which Cursor substitutes in headers);
// VS Code's asks for it once through an "inputs" prompt (${input:ID}, kept
// in VS Code's secret storage), since VS Code does not substitute ${env:}
// in headers (microsoft/vscode#336232, open as of 2026-09); Claude Desktop's
// file takes local (stdio) servers only.

type clientSpec struct {
	name, title string
	key         string // the object that maps server names to entries
	stdioType   string // the entry's "type" for stdio, if the client wants one
	httpType    string // the entry's "type" for HTTP ("" and http unsupported: see noHTTP)
	noHTTP      string // why the client cannot take an HTTP entry, if it cannot
	path        func() (string, error)
	after       string // what to do once the file is written
}

var clientSpecs = []clientSpec{
	{name: "claude", title: "Claude Desktop", key: "mcpServers",
		noHTTP: "Claude Desktop's claude_desktop_config.json takes only servers it starts itself (stdio): leave out -url, or add the URL in Claude's own settings",
		path: func() (string, error) {
			dir, err := os.UserConfigDir() // ~/Library/Application Support, %AppData%, $XDG_CONFIG_HOME or ~/.config
			if err != nil {
				return "", err
			}
			return filepath.Join(dir, "Claude", "claude_desktop_config.json"), nil
		},
		after: "quit Claude Desktop fully and start it again to load the server"},
	{name: "cursor", title: "Cursor", key: "mcpServers",
		path: func() (string, error) {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			return filepath.Join(home, ".cursor", "mcp.json"), nil
		},
		after: "Cursor lists the server under its MCP settings (restart Cursor if it does not appear)"},
	{name: "vscode", title: "VS Code", key: "servers", stdioType: "stdio", httpType: "http",
		path: func() (string, error) {
			wd, err := os.Getwd()
			if err != nil {
				return "", err
			}
			return filepath.Join(wd, ".vscode", "mcp.json"), nil // this workspace's
		},
		after: "open this folder in VS Code; the server is listed by the \"MCP: List Servers\" command"},
}

func clientNames() []string {
	var names []string
	for _, c := range clientSpecs {
		names = append(names, c.name)
	}
	return names
}

func completeClients(i int, _ map[string]string) completion {
	var c completion
	if i == 0 {
		for _, s := range clientSpecs {
			c.words = append(c.words, candidate{s.name, s.title})
		}
	}
	return c
}

func findClient(name string) (clientSpec, bool) {
	for _, c := range clientSpecs {
		if c.name == name {
			return c, true
		}
	}
	return clientSpec{}, false
}

const clientConfigHelp = `
Without -write, prints the entry as a whole config file (JSON on stdout) to
paste or merge by hand. With -write, merges it into the client's file:
  claude  claude_desktop_config.json in the user config directory
          (~/.config/Claude on Linux, ~/Library/Application Support/Claude on macOS)
  cursor  ~/.cursor/mcp.json
  vscode  .vscode/mcp.json in the current directory (the workspace)
(-file PATH names another), keeping every other entry and key, after
copying the file to PATH.YYYYMMDD-HHMMSS.bak; the file is replaced
atomically and rewritten with two-space indentation. A file that is not
plain JSON (VS Code allows comments) is refused, with the position; so
is a file owned by another user, and (VS Code) one where another server
already names maiden's token input.

The entry runs "maiden serve -config /abs/agent.toml" with this binary's
absolute path (and -cache, -isolation, -v if given). With -url the entry
connects to a running "maiden serve -http" instead, and -auth-token-env NAME
adds the bearer token by reference (never its value): Cursor reads it from
$NAME, VS Code prompts for it once. When agent.toml (-config) declares
[agents], -agent NAME is required with -url too: the entry sends that
agent's token (maiden agents token NAME mints it), which Cursor reads from
$MAIDEN_TOKEN_NAME (or -auth-token-env's). Claude Desktop takes stdio
entries only.`

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func cmdClientConfig(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("client config", stderr)
	write := fs.Bool("write", false, "merge the entry into the client's config file (a backup is written first)")
	file := fs.String("file", "", "the client config file `PATH` to write (default: the client's own, see above)")
	name := fs.String("name", "maiden", "the server's `NAME` in the client")
	rawURL := fs.String("url", "", "connect to a running maiden serve -http at `URL` (e.g. http://127.0.0.1:8700/mcp) instead of starting maiden")
	tokenEnv := fs.String("auth-token-env", "", "with -url: send Authorization: Bearer with the token in the environment variable `NAME` (referenced, never written)")
	agent := fs.String("agent", "", "the agent `NAME` the client is (required when agent.toml declares [agents]): without -url, the one its maiden serves as; with -url, the one whose token it sends")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "maiden client config: "+format+"\n", a...)
		return exitUsage
	}
	if len(pos) != 1 {
		return fail("name one client: %s (usage: maiden client config CLIENT [-write])", strings.Join(clientNames(), ", "))
	}
	spec, ok := findClient(pos[0])
	if !ok {
		return fail("unknown client %q (there is: %s)", pos[0], strings.Join(clientNames(), ", "))
	}
	if strings.TrimSpace(*name) == "" || strings.ContainsFunc(*name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fail("-name %q: the server name must be printable and not empty", *name)
	}
	if *file != "" && !*write {
		return fail("-file names the file -write writes; add -write (without it the entry is printed)")
	}

	var entry any
	var input *vscodeInput
	if *rawURL != "" {
		for _, f := range []string{"cache", "isolation", "v", "state"} {
			if flagGiven(fs, f) {
				return fail("-%s configures the maiden the client starts; with -url the client connects to a running server, so give -%s to that maiden serve", f, f)
			}
		}
		// With [agents], the server answers only an agent's own token: the
		// entry must send one, and -agent says whose.
		agentName, err := httpAgent(c, fs, *agent)
		if err != nil {
			return fail("%v", err)
		}
		if agentName != "" && *tokenEnv == "" {
			*tokenEnv = agentTokenEnv(agentName)
		}
		if spec.noHTTP != "" {
			return fail("%s", spec.noHTTP)
		}
		u, err := url.Parse(*rawURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return fail("-url %q: want an http:// or https:// URL with a host, e.g. http://127.0.0.1:8700/mcp", *rawURL)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = mcpserver.Path
		}
		e := httpEntry{Type: spec.httpType, URL: u.String()}
		if *tokenEnv != "" {
			if !envNameRE.MatchString(*tokenEnv) {
				return fail("-auth-token-env %q: not an environment variable name (letters, digits and _, not starting with a digit)", *tokenEnv)
			}
			source := fmt.Sprintf("the value of $%s where maiden serve runs", *tokenEnv)
			if agentName != "" {
				source = fmt.Sprintf("agent %s's token: maiden agents token %s prints one", agentName, agentName)
			}
			switch spec.name {
			case "vscode":
				input = &vscodeInput{Type: "promptString", ID: *name + "-token", Password: true,
					Description: fmt.Sprintf("Bearer token of %s (%s)", u.Redacted(), source)}
				e.Headers = map[string]string{"Authorization": "Bearer ${input:" + input.ID + "}"}
			default:
				e.Headers = map[string]string{"Authorization": "Bearer ${env:" + *tokenEnv + "}"}
				if agentName != "" {
					fmt.Fprintf(stderr, "maiden client config: %s sends $%s from its own environment: set it to the token maiden agents token %s prints\n", spec.title, *tokenEnv, agentName)
				}
			}
			if u.Scheme == "http" && !mcpserver.IsLoopback(u.Host) {
				fmt.Fprintf(stderr, "maiden client config: warning: %s is plain http to another machine: the token would cross the network unencrypted; put TLS in front of maiden serve\n", u.Redacted())
			}
		}
		entry = e
	} else {
		if flagGiven(fs, "auth-token-env") {
			return fail("-auth-token-env goes with -url (a client that starts maiden itself needs no token)")
		}
		e, err := stdioEntryFor(spec, fs, c, *agent, stderr)
		if err != nil {
			return fail("%v", err)
		}
		entry = e
	}

	entryJSON := mustJSON(entry)
	var inputJSON json.RawMessage
	if input != nil {
		inputJSON = mustJSON(input)
	}
	if !*write {
		doc := []member{{spec.key, mustJSON([]member{{*name, entryJSON}})}}
		if input != nil {
			doc = append(doc, member{"inputs", json.RawMessage("[" + string(inputJSON) + "]")})
		}
		stdout.Write(indentJSON(encodeObject(doc)))
		fmt.Fprintf(stderr, "(the %q entry for %s; maiden client config %s -write merges it into the client's file)\n", *name, spec.title, spec.name)
		return exitOK
	}

	path := *file
	if path == "" {
		p, err := spec.path()
		if err != nil {
			return fail("cannot find %s's config file: %v; name it with -file PATH", spec.title, err)
		}
		path = p
	}
	msg, err := mergeClientFile(path, spec.key, *name, entryJSON, input, inputJSON)
	if err != nil {
		fmt.Fprintf(stderr, "maiden client config: %v\n", err)
		return exitUsage
	}
	fmt.Fprint(stdout, msg)
	if !strings.Contains(msg, "nothing to do") {
		fmt.Fprintf(stdout, "next: %s\n", spec.after)
	}
	return exitOK
}

type stdioEntry struct {
	Type    string   `json:"type,omitempty"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

type httpEntry struct {
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

type vscodeInput struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Description string `json:"description"`
	Password    bool   `json:"password"`
}

// httpAgent is the agent an HTTP entry is for: with -config given, or
// agent.toml found where the flag's default says, and [agents] declared,
// -agent is required and must be declared; without [agents], -agent is
// refused (the server then takes no agent token). Without a readable
// agent.toml, -agent is taken as given.
func httpAgent(c *common, flags *flag.FlagSet, agent string) (string, error) {
	loaded, err := config.Load(c.config)
	if err != nil {
		if flagGiven(flags, "config") {
			var errs config.Errors
			if errors.As(err, &errs) {
				return "", fmt.Errorf("%s has problems (maiden check -config %s lists them)", c.config, c.config)
			}
			return "", err
		}
		return agent, nil
	}
	switch {
	case loaded.Implicit() && agent != "":
		return "", fmt.Errorf("-agent %q: %s declares no [agents] (the server takes no agent tokens)", agent, c.config)
	case loaded.Implicit():
		return "", nil
	case agent == "":
		var names []string
		for _, a := range loaded.Agents() {
			names = append(names, a.Name)
		}
		return "", fmt.Errorf("%s declares agents (%s): the server answers only an agent's token; name the agent this client is with -agent NAME (maiden agents token NAME mints its token)", c.config, strings.Join(names, ", "))
	}
	if _, ok := loaded.Agent(agent); !ok {
		return "", fmt.Errorf("-agent %q: not declared in %s", agent, c.config)
	}
	return agent, nil
}

// agentTokenEnv is the environment variable an HTTP entry for agent reads
// its token from, unless -auth-token-env names another: MAIDEN_TOKEN_ and
// the agent's name in capitals, other characters as _.
func agentTokenEnv(agent string) string {
	return "MAIDEN_TOKEN_" + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, agent)
}

// stdioEntryFor is the entry that starts this maiden binary on agent.toml,
// with absolute paths; it warns (on stderr) about what would make the
// client's maiden fail.
func stdioEntryFor(spec clientSpec, flags *flag.FlagSet, c *common, agent string, stderr io.Writer) (stdioEntry, error) {
	exe, err := maidenPath()
	if err != nil {
		return stdioEntry{}, fmt.Errorf("cannot find this maiden binary's path: %v", err)
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		fmt.Fprintf(stderr, "maiden client config: warning: %s is a temporary binary (go run or go test); install maiden (make build, or go install) and run this with the installed binary\n", exe)
	}
	cfg, err := filepath.Abs(c.config)
	if err != nil {
		return stdioEntry{}, err
	}
	fi, err := os.Stat(cfg)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return stdioEntry{}, fmt.Errorf("%s: file not found; name your agent configuration with -config FILE", c.config)
		}
		return stdioEntry{}, fmt.Errorf("%s: %v", c.config, err)
	}
	if !fi.Mode().IsRegular() {
		return stdioEntry{}, fmt.Errorf("%s: not a regular file", c.config)
	}
	args := []string{"serve", "-config", cfg}
	var passErr error
	flags.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "cache":
			v := f.Value.String()
			if v != "off" && v != "" {
				abs, err := filepath.Abs(v)
				if err != nil {
					passErr = err
				}
				v = abs
			}
			args = append(args, "-cache", v)
		case "isolation":
			args = append(args, "-isolation", f.Value.String())
		case "state":
			v := f.Value.String()
			if !config.IsStateURL(v) {
				abs, err := filepath.Abs(v)
				if err != nil {
					passErr = err
				}
				v = abs
			}
			args = append(args, "-state", v)
		case "v":
			if f.Value.String() == "true" {
				args = append(args, "-v")
			}
		}
	})
	if passErr != nil {
		return stdioEntry{}, passErr
	}
	loaded, err := config.Load(cfg)
	switch {
	case err == nil && !loaded.Implicit() && agent == "":
		var names []string
		for _, a := range loaded.Agents() {
			names = append(names, a.Name)
		}
		return stdioEntry{}, fmt.Errorf("%s declares agents (%s): name the one %s's maiden serves as with -agent NAME", cfg, strings.Join(names, ", "), spec.title)
	case err == nil && loaded.Implicit() && agent != "" && agent != maiden.DefaultAgent:
		return stdioEntry{}, fmt.Errorf("-agent %q: %s declares no [agents]", agent, cfg)
	case err == nil && !loaded.Implicit():
		if _, ok := loaded.Agent(agent); !ok {
			return stdioEntry{}, fmt.Errorf("-agent %q: not declared in %s", agent, cfg)
		}
	}
	if agent != "" && (err != nil || !loaded.Implicit()) {
		args = append(args, "-agent", agent)
	}
	if err != nil {
		fmt.Fprintf(stderr, "maiden client config: warning: %s has problems (maiden check -config %s lists them); %s cannot start maiden until they are fixed\n", cfg, cfg, spec.title)
	} else {
		var secrets []string
		for _, t := range loaded.Tools() {
			for _, s := range t.Secrets {
				if !slices.Contains(secrets, s) {
					secrets = append(secrets, s)
				}
			}
		}
		if len(secrets) > 0 {
			vars := make([]string, len(secrets))
			for i, s := range secrets {
				vars[i] = "MAIDEN_SECRET_" + s
			}
			fmt.Fprintf(stderr, "maiden client config: note: the tools use credentials %s; %s starts maiden with its own environment, so give it %s (e.g. an \"env\" object in the entry); this command writes no secret values\n",
				strings.Join(secrets, ", "), spec.title, strings.Join(vars, ", "))
		}
	}
	return stdioEntry{Type: spec.stdioType, Command: exe, Args: args}, nil
}

// maidenPath is the absolute path of this binary: os.Executable, unless
// maiden was started through a link to the same file (~/.local/bin/maiden
// -> /opt/maiden-1.2/maiden, as installers do), whose path is then kept, so
// that the client follows an upgrade that moves the link.
func maidenPath() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	invoked := os.Args[0]
	if !strings.ContainsRune(invoked, filepath.Separator) {
		if invoked, err = exec.LookPath(invoked); err != nil {
			return exe, nil
		}
	}
	if invoked, err = filepath.Abs(invoked); err != nil {
		return exe, nil
	}
	a, err1 := os.Stat(invoked)
	b, err2 := os.Stat(exe)
	if err1 == nil && err2 == nil && os.SameFile(a, b) {
		return invoked, nil
	}
	return exe, nil
}

// member is one key of a JSON object, its value kept as written.
type member struct {
	key string
	val json.RawMessage
}

// mustJSON encodes v without HTML escaping (a URL's & stays &).
func mustJSON(v any) json.RawMessage {
	if ms, ok := v.([]member); ok {
		return encodeObject(ms)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only maiden's own types are encoded here
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

func encodeObject(ms []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(mustJSON(m.key))
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func indentJSON(data []byte) []byte {
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "  "); err != nil {
		panic(err) // built from valid JSON
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// parseObject reads a JSON object keeping its keys in order and its values
// as written. data must be valid JSON (see checkJSON).
func parseObject(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errNotObject
	}
	var ms []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{t.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return ms, nil
}

var errNotObject = errors.New("not an object")

// checkJSON reports where data stops being JSON, as file:line:column.
func checkJSON(file string, data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return fmt.Errorf("%s: not valid JSON: %v", file, err)
	}
	off := int(se.Offset)
	if off > len(data) {
		off = len(data)
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n') - 1
	if off > 0 && col == 0 {
		col = 1
	}
	hint := ""
	if bytes.Contains(data, []byte("//")) || bytes.Contains(data, []byte("/*")) {
		hint = " (comments and trailing commas are not JSON)"
	}
	return fmt.Errorf("%s:%d:%d: not valid JSON: %v%s; maiden edits only files it can parse, so nothing was written: fix the file, or add the entry by hand (run without -write to print it)", file, line, col, se, hint)
}

func jsonKind(raw json.RawMessage) string {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 {
		return "empty"
	}
	switch s[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// mentions reports whether s occurs in a string of the JSON value raw
// (keys included), read after its escapes: "\u0024{input:x}" is
// "${input:x}" to the client that reads it.
func mentions(raw json.RawMessage, s string) bool {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return bytes.Contains(raw, []byte(s))
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case string:
			return strings.Contains(v, s)
		case []any:
			return slices.ContainsFunc(v, walk)
		case map[string]any:
			for k, e := range v {
				if strings.Contains(k, s) || walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// describeTarget names the file written: path, and where a symlink at
// path leads, if it does.
func describeTarget(path, target string) string {
	if target == path {
		return path
	}
	return fmt.Sprintf("%s (a symlink to %s)", path, target)
}

// maxClientFile bounds what is read of a client's config file.
const maxClientFile = 16 << 20

// mergeClientFile puts entry under key.name in the JSON file at path (and
// input into its "inputs", for VS Code), keeping everything else, after a
// backup; it returns what it did, for the user.
func mergeClientFile(path, key, name string, entry json.RawMessage, input *vscodeInput, inputJSON json.RawMessage) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	// Write through a symlink (dotfile managers link these files).
	target := abs
	if t, err := filepath.EvalSymlinks(abs); err == nil {
		target = t
	}
	var data []byte
	perm := fs.FileMode(0o644)
	exists := false
	if fi, err := os.Stat(target); err == nil {
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("%s: not a regular file", abs)
		}
		if fi.Size() > maxClientFile {
			return "", fmt.Errorf("%s: %d bytes, more than a client config file should be (%d); nothing was written", abs, fi.Size(), maxClientFile)
		}
		if uid, other := atomicfile.OwnedByOther(fi); other {
			return "", fmt.Errorf("%s: owned by uid %d, not by you (uid %d): -write replaces the file, which would take it from its owner; nothing was written: run this as its owner, or print the entry (without -write) and add it by hand", describeTarget(abs, target), uid, os.Geteuid())
		}
		if data, err = os.ReadFile(target); err != nil {
			return "", err
		}
		perm, exists = fi.Mode().Perm(), true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}

	var top []member
	if len(bytes.TrimSpace(data)) > 0 {
		if err := checkJSON(abs, data); err != nil {
			return "", err
		}
		if top, err = parseObject(data); err != nil {
			return "", fmt.Errorf("%s: the file is JSON but not an object ({...}); nothing was written", abs)
		}
	}
	find := func(ms []member, k string) (int, error) {
		at := -1
		for i, m := range ms {
			if m.key == k {
				if at >= 0 {
					return 0, fmt.Errorf("%s: key %q appears twice; nothing was written: remove one", abs, k)
				}
				at = i
			}
		}
		return at, nil
	}

	ki, err := find(top, key)
	if err != nil {
		return "", err
	}
	var servers []member
	if ki >= 0 && jsonKind(top[ki].val) != "null" {
		if servers, err = parseObject(top[ki].val); err != nil {
			return "", fmt.Errorf("%s: %q is %s, not an object; nothing was written", abs, key, jsonKind(top[ki].val))
		}
	}
	ni, err := find(servers, name)
	if err != nil {
		return "", err
	}
	if input != nil {
		// VS Code keeps what is typed at an input's prompt and puts it
		// wherever ${input:ID} appears: another entry naming maiden's
		// token input (a workspace file comes with its repository) would
		// be sent the maiden token.
		ref := "${input:" + input.ID + "}"
		for i, m := range servers {
			if i != ni && mentions(m.val, ref) {
				return "", fmt.Errorf("%s: server %q already names %s, the input maiden's entry asks the token with: VS Code would send that server the maiden token; nothing was written: remove or change that entry (or give this one another -name)", abs, m.key, ref)
			}
		}
	}
	var did []string
	switch {
	case ni < 0:
		servers = append(servers, member{name, entry})
		did = append(did, fmt.Sprintf("added server %q", name))
	case !jsonEqual(servers[ni].val, entry):
		servers[ni].val = entry
		did = append(did, fmt.Sprintf("replaced server %q (the previous entry is in the backup)", name))
	}
	if ki < 0 {
		top = append(top, member{key, encodeObject(servers)})
	} else {
		top[ki].val = encodeObject(servers)
	}

	if input != nil {
		ii, err := find(top, "inputs")
		if err != nil {
			return "", err
		}
		var inputs []json.RawMessage
		if ii >= 0 && jsonKind(top[ii].val) != "null" {
			if err := json.Unmarshal(top[ii].val, &inputs); err != nil {
				return "", fmt.Errorf("%s: \"inputs\" is %s, not an array; nothing was written", abs, jsonKind(top[ii].val))
			}
		}
		at := -1
		for i, in := range inputs {
			var probe struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(in, &probe) == nil && probe.ID == input.ID {
				at = i
			}
		}
		switch {
		case at < 0:
			inputs = append(inputs, inputJSON)
			did = append(did, fmt.Sprintf("added input %q (VS Code asks for the token once)", input.ID))
		case !jsonEqual(inputs[at], inputJSON):
			inputs[at] = inputJSON
			did = append(did, fmt.Sprintf("replaced input %q", input.ID))
		}
		raw := mustJSON(inputs)
		if ii < 0 {
			top = append(top, member{"inputs", raw})
		} else {
			top[ii].val = raw
		}
	}

	if len(did) == 0 {
		return fmt.Sprintf("%s already has this %q entry; nothing to do\n", abs, name), nil
	}
	out := indentJSON(encodeObject(top))
	var b strings.Builder
	if exists {
		backup, err := writeBackup(target, data, perm)
		if err != nil {
			return "", fmt.Errorf("%s: cannot write a backup, so nothing was written: %v", abs, err)
		}
		fmt.Fprintf(&b, "backup: %s\n", backup)
	} else if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return "", err
	}
	if err := atomicfile.Write(target, out, perm); err != nil {
		return "", fmt.Errorf("%s: %v", abs, err)
	}
	verb := "updated"
	if !exists {
		verb = "created"
	}
	fmt.Fprintf(&b, "%s %s: %s\n", verb, describeTarget(abs, target), strings.Join(did, "; "))
	return b.String(), nil
}

// writeBackup copies data to path.YYYYMMDD-HHMMSS.bak, a new file, never
// one that exists.
func writeBackup(path string, data []byte, perm fs.FileMode) (string, error) {
	stem := path + "." + time.Now().UTC().Format("20060102-150405")
	for i := 1; i < 100; i++ {
		name := stem + ".bak"
		if i > 1 {
			name = fmt.Sprintf("%s-%d.bak", stem, i)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, werr := f.Write(data)
		if err := f.Sync(); werr == nil {
			werr = err
		}
		if err := f.Close(); werr == nil {
			werr = err
		}
		if werr != nil {
			os.Remove(name)
			return "", werr
		}
		return name, nil
	}
	return "", fmt.Errorf("%s.bak: too many backups this second", stem)
}
