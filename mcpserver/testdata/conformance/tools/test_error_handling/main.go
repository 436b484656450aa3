// test_error_handling: the conformance suite's tools-call-error tool. It
// always fails; maiden reports the failure as a result with isError set.
package main

import (
	"context"
	"errors"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type tool struct{}

func (tool) Describe() string { return "Always fails (MCP conformance suite)." }

func (tool) Schema() string { return `{"type":"object","properties":{}}` }

func (tool) Execute(ctx context.Context, in []byte) ([]byte, error) {
	return nil, errors.New("This tool intentionally returns an error for testing")
}

func init() { maiden.Register(tool{}) }

func main() {}
