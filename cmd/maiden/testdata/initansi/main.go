// Command initansi writes terminal control sequences while it initialises
// and then panics: maiden build quotes its output in the warning that it
// could not be pre-initialised, and must show it escaped
// (TestBuildEscapesToolText).
package main

import (
	"context"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

func init() {
	println("init\x1b]0;owned\a\x1b[2J")
	panic("boom\x1b[8m")
}

func main() {}

type tool struct{}

func (tool) Describe() string                                { return "Panics while initialising." }
func (tool) Schema() string                                  { return `{"type":"object"}` }
func (tool) Execute(context.Context, []byte) ([]byte, error) { return nil, nil }

func init() { maiden.Register(tool{}) }
