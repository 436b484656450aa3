// Command initclock reads the wall clock in a package-level variable: a
// snapshot would freeze it, so maiden build must not pre-initialise it
// without saying so (preinit_test.go).
package main

import (
	"context"
	"strconv"
	"time"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

var started = time.Now()

func init() { maiden.Register(tool{}) }

func main() {}

type tool struct{}

func (tool) Describe() string { return "Returns the time its package was initialised." }
func (tool) Schema() string   { return `{"type":"object"}` }
func (tool) Execute(context.Context, []byte) ([]byte, error) {
	return []byte(strconv.FormatInt(started.UnixNano(), 10)), nil
}
