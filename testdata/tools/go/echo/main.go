// Command echo is the Go echo tool the benchmarks call: it returns its
// message unchanged, as {"message": ...}.
package main

import (
	"context"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type message struct {
	Message string `json:"message" jsonschema:"the text to echo back"`
}

func main() {}

func init() {
	maiden.Register(maiden.Func("Echoes its message back.", func(ctx context.Context, in message) (message, error) {
		return in, nil
	}))
}
