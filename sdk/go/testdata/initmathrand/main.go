// Command initmathrand draws from math/rand's top-level generator in a
// package-level variable. That reads no WASI (the runtime's generator was
// seeded when it started), yet a snapshot would freeze the value, so maiden
// build must not pre-initialise it without saying so (preinit_test.go).
package main

import (
	"context"
	"math/rand"
	"strconv"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

var id = rand.Int63()

func init() { maiden.Register(tool{}) }

func main() {}

type tool struct{}

func (tool) Describe() string { return "Returns a number drawn when its package was initialised." }
func (tool) Schema() string   { return `{"type":"object"}` }
func (tool) Execute(context.Context, []byte) ([]byte, error) {
	return []byte(strconv.FormatInt(id, 10)), nil
}
