// Command initlog logs through the host while it initialises. The host is
// not there when maiden build takes the snapshot, so the build falls back to
// an ordinary module, which logs on every call (preinit_test.go).
package main

import (
	"context"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

func init() {
	maiden.Log(maiden.LevelInfo, "initialising")
	maiden.Register(tool{})
}

func main() {}

type tool struct{}

func (tool) Describe() string { return "Logs while it initialises." }
func (tool) Schema() string   { return `{"type":"object"}` }
func (tool) Execute(context.Context, []byte) ([]byte, error) {
	return []byte(`"ok"`), nil
}
