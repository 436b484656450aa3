package grant

import (
	"fmt"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/jsonparse"
)

// BenchmarkRender compares rendering a call's input from its text
// (Render, what authorize did before the one parse) with rendering it from
// the value decoded once (RenderJSONInput, what it does now), on the
// inputs of the root's BenchmarkInputSize: one long string, or many small
// objects. Run:
//
//	go test -run '^$' -bench Render ./internal/grant/
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20} {
		str := fmt.Sprintf(`{"message":%q}`, strings.Repeat("a", n-14))
		const item = `{"id":123,"ok":true,"tag":"abc"}`
		obj := `{"message":"m","data":[` + strings.TrimSuffix(strings.Repeat(item+",", (n-40)/(len(item)+1)), ",") + `]}`
		for _, in := range []struct{ name, text string }{{"string", str}, {"objects", obj}} {
			name := fmt.Sprintf("%dKiB/%s", n>>10, in.name)
			b.Run("text/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(in.text)))
				for b.Loop() {
					if _, err := Render([]byte(in.text)); err != nil {
						b.Fatal(err)
					}
				}
			})
			v, err := jsonparse.ParseStrict(in.text)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("value/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(in.text)))
				for b.Loop() {
					if _, err := RenderJSONInput(v); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
