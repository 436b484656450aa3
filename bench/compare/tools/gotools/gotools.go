// Package gotools holds the Go versions of bench/compare's workloads as maiden
// SDK tools, so that the same code runs sandboxed (built into a component:
// see ../jsonfield, and examples/echo for Echo) and unsandboxed (the native-go
// rows call Execute directly).
package gotools

import (
	"context"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

// Echo returns its input unchanged, as examples/echo does (that example is
// what the maiden-go echo row runs).
var Echo maiden.Tool = echo{}

type echoInput struct {
	Message string `json:"message" jsonschema:"any text; it comes back as it went in"`
}

type echo struct{}

func (echo) Describe() string { return "Echoes its input back unchanged." }

func (echo) Schema() string { return maiden.SchemaFor[echoInput]() }

func (echo) Execute(ctx context.Context, in []byte) ([]byte, error) { return in, nil }

// JSONFieldInput is what JSONField reads of its input: encoding/json parses
// the whole object (checking it is well-formed) and keeps this one member.
type JSONFieldInput struct {
	Target string `json:"target" jsonschema:"the string to return"`
}

// JSONField returns the top-level "target" member of a JSON object, which
// must be a string, as JSON text (maiden.Func encodes the result).
var JSONField = maiden.Func("Returns the top-level \"target\" string of a JSON object, as JSON text.",
	func(ctx context.Context, in JSONFieldInput) (string, error) { return in.Target, nil })
