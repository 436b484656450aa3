// echo: a maiden tool in Go that returns its input unchanged. It implements
// maiden.Tool directly, the SDK's lowest-level surface; the weather example
// and the `maiden new go` template use maiden.Func instead.
//
//	maiden build examples/echo
//	maiden call -config examples/agent.toml echo '{"message":"hi"}'
package main

import (
	"context"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type input struct {
	Message string `json:"message" jsonschema:"any text; it comes back as it went in"`
}

type echo struct{}

func (echo) Describe() string {
	return "Echoes its input back unchanged. Use it to check that maiden runs Go tools."
}

func (echo) Schema() string { return maiden.SchemaFor[input]() }

// Execute returns the input as is: the host has already checked that it is
// JSON matching the schema.
func (echo) Execute(ctx context.Context, in []byte) ([]byte, error) { return in, nil }

// init registers the tool: maiden runs a Go tool as a WASI reactor, so init
// functions run when the host instantiates it and main never runs.
func init() { maiden.Register(echo{}) }

func main() {}
