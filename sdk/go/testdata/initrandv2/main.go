// Command initrandv2 draws from math/rand/v2's top-level generator in an
// init function; those functions are small enough to be inlined into the
// caller, which must not hide the draw from maiden build (preinit_test.go).
package main

import (
	"context"
	"math/rand/v2"
	"strconv"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

var n uint64

func init() {
	n = rand.Uint64()
	maiden.Register(tool{})
}

func main() {}

type tool struct{}

func (tool) Describe() string { return "Returns a number drawn when its package was initialised." }
func (tool) Schema() string   { return `{"type":"object"}` }
func (tool) Execute(context.Context, []byte) ([]byte, error) {
	return []byte(strconv.FormatUint(n, 10)), nil
}
