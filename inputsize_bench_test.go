package maiden

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// inputShapes are the call inputs of BenchmarkInputSize: one long string,
// or many small objects, each about n bytes, both accepted by echo's schema
// (an object with a string "message"; other properties allowed).
func inputShapes(n int) []struct{ name, input string } {
	str := fmt.Sprintf(`{"message":%q}`, strings.Repeat("a", max(1, n-14)))
	const item = `{"id":123,"ok":true,"tag":"abc"}`
	items := max(1, (n-40)/(len(item)+1))
	obj := `{"message":"m","data":[` + strings.TrimSuffix(strings.Repeat(item+",", items), ",") + `]}`
	return []struct{ name, input string }{{"string", str}, {"objects", obj}}
}

var inputSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

// BenchmarkInputSize is a whole call of the echo tool through Host.Call at
// input sizes from 1 KiB to 1 MiB, a string or 30,000 small objects, in
// process and in workers; MB/s is the input's size over the call's time.
// BenchmarkInputStages splits the in-process time among the stages the
// input goes through. Run:
//
//	go test -run '^$' -bench 'Input(Size|Stages)' -count 3 .
func BenchmarkInputSize(b *testing.B) {
	for _, iso := range []struct {
		name string
		iso  Isolation
	}{{"process", InProcess}, {"workers", Workers}} {
		b.Run(iso.name, func(b *testing.B) {
			path := b.TempDir() + "/agent.toml"
			src := fmt.Sprintf("version = 1\nmax_input_bytes = %d\n[tools.echo]\npath = %q\n", 4<<20, testkit.Component(b, "echo"))
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				b.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				b.Fatal(err)
			}
			h, err := New(cfg, &Options{CacheDir: testkit.CompileCache(b), Isolation: iso.iso})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			for _, size := range inputSizes {
				for _, shape := range inputShapes(size.n) {
					b.Run(size.name+"/"+shape.name, func(b *testing.B) {
						c := Call{Tool: "echo", Input: shape.input}
						b.SetBytes(int64(len(shape.input)))
						for b.Loop() {
							res, err := h.Call(context.Background(), c)
							if err != nil || !res.OK {
								b.Fatalf("%v %+v", err, res.Error)
							}
						}
					})
				}
			}
		})
	}
}

// BenchmarkInputStages is where an input's time goes before the tool runs:
// parsing it (once per call) and checking it against the schema.
func BenchmarkInputStages(b *testing.B) {
	schema := compileSchema(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)
	for _, size := range inputSizes {
		for _, shape := range inputShapes(size.n) {
			b.Run("parse/"+size.name+"/"+shape.name, func(b *testing.B) {
				b.SetBytes(int64(len(shape.input)))
				for b.Loop() {
					if _, err := parseInput(shape.input); err != nil {
						b.Fatal(err)
					}
				}
			})
			v, err := parseInput(shape.input)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("validate/"+size.name+"/"+shape.name, func(b *testing.B) {
				b.SetBytes(int64(len(shape.input)))
				for b.Loop() {
					if err := schema.validateWithin(context.Background(), 0, v); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
