package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/secret"
)

// This file is WebAssembly tools that describe themselves as a command
// tree (issue 13): their schema() returns a command description
// (internal/command, docs/command-model.md: an object with the key
// "maiden_command") instead of a JSON Schema. The host then serves the
// description's JSON Schema projection in tools/list, parses and
// validates each call with the description (errors name the argument,
// kind input), authorizes it on the command's canonical rendering — the
// grammar wrapped CLIs use, so `tool:invoke notes list` allows that
// command and no other — and gives the tool the validated call, built
// from the invocation (never the raw input):
//
//	{"command": ["show"], "options": {"id": 3}, "positionals": ["x"], "stdin": "..."}
//
// command is the path of canonical names ([] for a tool without
// subcommands); options are the options the call has, defaults included,
// by name (a value or optional option a string or an integer as declared,
// a list an array, a map an object of strings, a bool flag true, a count
// an integer); positionals are in order (strings, or integers as
// declared); stdin is present only when the command declares it and the
// call gives it.
//
// Authorization needs the description, and the description is the tool's:
// the tool is opened (the runner's caches answer by digest) before the
// cards are asked. A JSON-input tool goes on exactly as before: what it
// could not load is reported after authorization, by loadAndValidate,
// which runs the version opened here. A description that does not load
// makes the schema unusable: the tool is kind invalid in Check, Tools and
// every call, and never runs.

// toolCommand is the command description a call of a WebAssembly tool was
// parsed with, and the version (digest) it came from.
type toolCommand struct {
	spec   *command.Spec
	digest string
}

// compileToolSchema is compileSchema for a WebAssembly tool's schema(): a
// command description is loaded, and its JSON Schema projection compiled
// (under the same limits as any schema) and served in its place.
func compileToolSchema(text string) *inputSchema {
	if !command.IsDescription(text) {
		return compileSchema(text)
	}
	if len(text) > maxSchemaBytes {
		return &inputSchema{err: fmt.Errorf("schema() returned %d bytes; the limit is %d", len(text), maxSchemaBytes)}
	}
	spec, err := command.Load([]byte(text))
	if err != nil {
		return &inputSchema{err: fmt.Errorf("schema() returned an unusable %v", err)}
	}
	s := compileSchema(spec.JSONSchema())
	if s.err != nil {
		return &inputSchema{err: fmt.Errorf("the JSON Schema of schema()'s command description: %v", s.err)}
	}
	s.cmd = spec
	return s
}

// sameCommand checks, at load, that the version about to run is the one
// the call was parsed and authorized with. A version replaced since (the
// stale-version retry) is accepted only if it reads the call as the same
// command rendering, and then the call as it reads it is returned (for
// the load stage to write); otherwise nothing runs and the caller is told
// to call again (kind unavailable). A JSON-input tool on both sides is not
// concerned.
func sameCommand(inv *invocation, t *sandbox.Tool, s *inputSchema) (*command.Invocation, *toolCommand, bool) {
	switch {
	case inv.toolCmd == nil && s.cmd == nil:
		return nil, nil, true
	case inv.toolCmd != nil && inv.toolCmd.digest == t.Digest:
		return nil, nil, true
	case inv.toolCmd != nil && s.cmd != nil:
		v, err := inv.value() // decoded by parse already
		if err != nil {
			return nil, nil, false
		}
		cmd, err := s.cmd.ParseValue(v)
		if err != nil || cmd.String() != inv.cmd.String() {
			return nil, nil, false
		}
		return cmd, &toolCommand{spec: s.cmd, digest: t.Digest}, true
	}
	return nil, nil, false
}

// toolChanged is the refusal of a call whose tool changed between its
// authorization and its run.
func toolChanged(inv *invocation) *ToolError {
	return &ToolError{Kind: KindUnavailable, Message: fmt.Sprintf("%s: a new version of the tool's file appeared while the call was being authorized, and it reads the call differently; nothing ran: call it again", inv.tool.Name)}
}

// toolInput is what the tool's execute receives: the input as sent for a
// JSON-input tool, the validated command call for a command tree, where
// each secret marker (internal/secret: what the cards saw for {"$secret": ...})
// becomes the call's handle, as the secrets.runInput stage does for a JSON input.
func (inv *invocation) toolInput() string {
	if inv.toolCmd == nil {
		return inv.call.Input
	}
	call := string(inv.cmd.ToolCall())
	if inv.secrets == nil {
		return call
	}
	doc, err := parseInput(call)
	if err != nil {
		return call // cannot happen (ToolCall writes JSON); the markers then stay: no handle, no secret
	}
	text, err := secret.Marshal(inv.secrets.WithHandles(doc))
	if err != nil {
		return call
	}
	return text
}

// ErrNoCommands is returned by CommandHelp for a tool that takes JSON
// input rather than commands.
var ErrNoCommands = errors.New("maiden: the tool has no command tree")

// CommandHelp is the help text of a command of a tool that describes
// itself as a command tree — a wrapped CLI ([clis.NAME]) or a WebAssembly
// tool whose schema() is a command description — at path (command names
// or aliases; none: the tool itself). It is what `maiden help TOOL
// [COMMAND...]` prints. A tool whose command description is unusable is
// an error naming the problem; a tool that takes JSON input is
// ErrNoCommands; an unknown tool ErrUnknownTool.
func (h *Host) CommandHelp(ctx context.Context, tool string, path ...string) (string, error) {
	if h.closed.Load() {
		return "", ErrClosed
	}
	cfg := h.cfg.Load()
	t, ok := cfg.Tool(tool)
	if !ok {
		return "", fmt.Errorf("%w %q", ErrUnknownTool, tool)
	}
	spec, err := h.kindsOf(cfg).of(tool).commandSpec(ctx, t)
	if err != nil {
		return "", err
	}
	return spec.Help(path...), nil
}
