// Command initrand draws a key from crypto/rand in an init function: a
// snapshot would give every instance (and everyone running the component)
// the same key, so maiden build must not pre-initialise it without saying so
// (preinit_test.go).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

var key = make([]byte, 16)

func init() {
	rand.Read(key)
	maiden.Register(tool{})
}

func main() {}

type tool struct{}

func (tool) Describe() string { return "Returns a key drawn when its package was initialised." }
func (tool) Schema() string   { return `{"type":"object"}` }
func (tool) Execute(context.Context, []byte) ([]byte, error) {
	return []byte(hex.EncodeToString(key)), nil
}
