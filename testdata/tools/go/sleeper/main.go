// Command sleeper is a hostile Go tool that waits inside WASI, where
// epoch interruption never fires: time.Sleep becomes a WASI poll in the
// host. Input {"ms": N} sleeps N milliseconds; {"op": "spin"} loops in
// guest code instead; {"op": "stdin"} reads the (empty) stdin.
package main

import (
	"context"
	"os"
	"time"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type input struct {
	MS int    `json:"ms,omitempty"`
	Op string `json:"op,omitempty"`
}

func main() {}

func init() {
	maiden.Register(maiden.Func("sleeps in WASI for as long as it is asked", func(ctx context.Context, in input) (string, error) {
		switch in.Op {
		case "spin":
			for {
			}
		case "stdin":
			b := make([]byte, 1)
			_, _ = os.Stdin.Read(b)
			return "read stdin", nil
		}
		time.Sleep(time.Duration(in.MS) * time.Millisecond)
		return "slept", nil
	}))
}
