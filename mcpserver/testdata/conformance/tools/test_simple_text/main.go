// test_simple_text: the conformance suite's tools-call-simple-text tool. It
// takes no arguments and returns the text the scenario describes.
package main

import (
	"context"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type tool struct{}

func (tool) Describe() string { return "Returns a simple text response (MCP conformance suite)." }

func (tool) Schema() string { return `{"type":"object","properties":{}}` }

func (tool) Execute(ctx context.Context, in []byte) ([]byte, error) {
	return []byte("This is a simple text response for testing."), nil
}

func init() { maiden.Register(tool{}) }

func main() {}
