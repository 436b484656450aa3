// json_schema_2020_12_tool: the conformance suite's json-schema-2020-12
// tool. Its input schema uses JSON Schema 2020-12 keywords ($schema, $defs
// with an $anchor, $ref, allOf/anyOf, if/then/else, additionalProperties),
// which tools/list must pass on unchanged.
package main

import (
	"context"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

const schema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "$anchor": "addressDef",
      "type": "object",
      "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"},
    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
    "phone": {"type": "string"},
    "email": {"type": "string"}
  },
  "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
  "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
  "then": {"required": ["phone"]},
  "else": {"required": ["email"]},
  "additionalProperties": false
}`

type tool struct{}

func (tool) Describe() string {
	return "Tool with JSON Schema 2020-12 features (MCP conformance suite)."
}

func (tool) Schema() string { return schema }

func (tool) Execute(ctx context.Context, in []byte) ([]byte, error) { return in, nil }

func init() { maiden.Register(tool{}) }

func main() {}
