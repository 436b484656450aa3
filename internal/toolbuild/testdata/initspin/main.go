// Command initspin never finishes initialising: maiden build's snapshot run
// must give up on it rather than hang (preinit_test.go).
package main

import (
	"context"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

var spins uint64

func init() {
	for {
		spins++
	}
}

func main() {}

type tool struct{}

func (tool) Describe() string                                { return "Never finishes initialising." }
func (tool) Schema() string                                  { return `{"type":"object"}` }
func (tool) Execute(context.Context, []byte) ([]byte, error) { return nil, nil }

var _ = maiden.Register
