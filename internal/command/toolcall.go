package command

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// IsDescription tells whether text (a WebAssembly tool's schema() answer)
// is a command description rather than a JSON Schema: a JSON object with
// the key "maiden_command" at its top level (as Load decodes keys, escapes
// included).
func IsDescription(text string) bool {
	d := json.NewDecoder(strings.NewReader(text))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return false
		}
		if k == "maiden_command" {
			return true
		}
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return false
		}
	}
	return false
}

// ToolCall is the JSON a command-tree WebAssembly tool's execute receives
// for the validated call (docs/command-model.md):
//
//	{"command": ["show"], "options": {"id": 3}, "positionals": ["x"], "stdin": "..."}
//
// command is the path of canonical names ([] for a tool without
// subcommands); options are the options the call has, defaults included,
// by name; positionals are in order (a variadic one's values spread);
// stdin is present only when the command declares it and the call gives
// it. It is built from the call's JSON projection, which is derived from
// its canonical rendering: what was authorized is what the tool gets.
func (inv *Invocation) ToolCall() []byte {
	var proj map[string]json.RawMessage
	if err := json.Unmarshal(inv.JSON(), &proj); err != nil {
		panic("command: a call's JSON projection does not decode: " + err.Error()) // JSON() marshals a map
	}
	// Written directly: the values are json.Marshal's compact output
	// already, and names and command words are command words (letters,
	// digits, '-', '_', '.': grant.IsCommandWord, checked by Load), which
	// a JSON string holds as they are.
	quote := func(b []byte, s string) []byte { return append(append(append(b, '"'), s...), '"') }
	b := make([]byte, 0, 64+len(proj)*32)
	b = append(b, `{"command":[`...)
	for i, w := range inv.Path() {
		if i > 0 {
			b = append(b, ',')
		}
		b = quote(b, w)
	}
	b = append(b, `],"options":{`...)
	stdin := proj["stdin"]
	delete(proj, "command")
	delete(proj, "stdin")
	var pos []json.RawMessage
	for _, p := range inv.Command().Positionals {
		v, ok := proj[p.Name]
		if !ok {
			continue
		}
		delete(proj, p.Name)
		if !p.Variadic {
			pos = append(pos, v)
			continue
		}
		var vs []json.RawMessage
		if err := json.Unmarshal(v, &vs); err != nil {
			panic("command: a variadic positional's projection is not an array: " + err.Error())
		}
		pos = append(pos, vs...)
	}
	for i, k := range slices.Sorted(maps.Keys(proj)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(quote(b, k), ':')
		b = append(b, proj[k]...)
	}
	b = append(b, `},"positionals":[`...)
	for i, v := range pos {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	b = append(b, ']')
	if stdin != nil {
		b = append(append(b, `,"stdin":`...), stdin...)
	}
	return append(b, '}')
}
