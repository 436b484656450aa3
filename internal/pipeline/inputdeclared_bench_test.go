package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// BenchmarkInputDeclared is BenchmarkInputSize/process for a declared
// agent, whose cards decide on the input's rendering (a card allowing
// any message and further arguments): what the one parse changes, the
// rendering derived from the decoded value instead of the text read again.
// Run:
//
//	go test -run '^$' -bench 'InputDeclared' -count 5 ./internal/pipeline
func BenchmarkInputDeclared(b *testing.B) {
	dir := b.TempDir()
	src := fmt.Sprintf(`version = 1
max_input_bytes = %d
[state]
path = %q
[tools.echo]
path = %q
[agents.a]
tools = ["echo"]
grants = ["tool:invoke echo --message=* --..."]
`, 4<<20, b.TempDir()+"/state.db", testkit.Component(b, "echo"))
	h, _ := testHost(b, dir, src, &Options{CacheDir: testkit.CompileCache(b), Isolation: api.InProcess})
	defer h.Close(context.Background())
	for _, size := range inputSizes {
		for _, shape := range inputShapes(size.n) {
			b.Run(size.name+"/"+shape.name, func(b *testing.B) {
				c := Call{Agent: "a", Tool: "echo", Input: shape.input}
				b.SetBytes(int64(len(shape.input)))
				defer reportCPU(b, len(shape.input))()
				for b.Loop() {
					res, err := h.Call(context.Background(), c)
					if err != nil || !res.OK {
						b.Fatalf("%v %+v", err, res.Error)
					}
				}
			})
		}
	}
}
