package grant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// This file is what a tool grant can match of a JSON tool, as the tool's
// input schema tells (the operator's CLI checks a prohibition with it
// before installing it: maiden.Host.GrantReach).

// SchemaReach reads a JSON tool's input schema (its top level only, which
// every accepted call satisfies) for what tool grant g can match: why no
// accepted call matches it, and an accepted argument that escapes it.
func SchemaReach(g Grant, schema string) (never, escapes string) {
	var s struct {
		Properties        map[string]json.RawMessage `json:"properties"`
		PatternProperties map[string]json.RawMessage `json:"patternProperties"`
		Required          []string                   `json:"required"`
		Additional        json.RawMessage            `json:"additionalProperties"`
	}
	if json.Unmarshal([]byte(schema), &s) != nil {
		return "", ""
	}
	names, rest := g.ToolArgs()
	closed := bytes.Equal(bytes.TrimSpace(s.Additional), []byte("false")) && len(s.PatternProperties) == 0
	if !rest {
		for _, r := range s.Required {
			if !slices.Contains(names, r) {
				return fmt.Sprintf("its input schema requires the argument %q, which the grant does not name (without --... a grant matches only calls whose arguments it all names)", r), ""
			}
		}
	}
	for _, n := range names {
		if _, ok := s.Properties[n]; !ok && closed {
			return fmt.Sprintf("its input schema accepts no argument %q", n), ""
		}
	}
	if rest {
		return "", ""
	}
	props := make([]string, 0, len(s.Properties))
	for p := range s.Properties {
		props = append(props, p)
	}
	slices.Sort(props)
	for _, p := range props {
		if !slices.Contains(names, p) {
			return "", "--" + p
		}
	}
	if !closed {
		return "", "any argument its input schema does not list"
	}
	return "", ""
}
