// test_custom_header: the tool of the conformance suite's
// http-custom-header-server-validation scenario (SEP-2243). Its one string
// parameter is annotated with x-mcp-header, so a 2026-07-28 client mirrors
// it in an Mcp-Param-Region header, which the server must check against the
// body before the tool runs. The tool returns its input.
package main

import (
	"context"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type tool struct{}

func (tool) Describe() string {
	return "Returns its input; its region parameter travels in an Mcp-Param-Region header too (MCP conformance suite)."
}

func (tool) Schema() string {
	return `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`
}

func (tool) Execute(ctx context.Context, in []byte) ([]byte, error) { return in, nil }

func init() { maiden.Register(tool{}) }

func main() {}
