// Command tool is a maiden tool written in Go: a WebAssembly component that
// an AI agent calls through maiden, in a sandbox with no ambient authority.
//
// Build it with `maiden build`, try it with `maiden call` (see README.md).
package main

import (
	"context"
	"errors"
	"strings"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

// Input is what an agent sends, as JSON. maiden shows agents the JSON Schema
// derived from it: the json tags name the fields, the jsonschema tags
// describe them, and fields without omitempty are required.
type Input struct {
	Message string `json:"message" jsonschema:"the text to echo back"`
	Shout   bool   `json:"shout,omitempty" jsonschema:"reply in upper case"`
}

// Output is what the tool returns, encoded as JSON.
type Output struct {
	Reply string `json:"reply"`
}

// echo is the tool. A returned error becomes the call's tool error, which
// the agent sees; a panic becomes a trap.
func echo(ctx context.Context, in Input) (Output, error) {
	if in.Message == "" {
		return Output{}, errors.New("message is empty")
	}
	maiden.Logf(maiden.LevelInfo, "echoing %d bytes", len(in.Message))
	reply := in.Message
	if in.Shout {
		reply = strings.ToUpper(reply)
	}
	return Output{Reply: reply}, nil
}

// init registers the tool. maiden runs a Go tool as a WASI reactor: the
// runtime and every init function run when the host instantiates it, and
// main never runs.
func init() {
	maiden.Register(maiden.Func("Echoes a message back, in upper case if asked to shout.", echo))
}

func main() {}
