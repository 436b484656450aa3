package jsonparse_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/jsonparse"
	"github.com/maiden-run/maiden/internal/testkit/cpuclock"
)

// shapes are the inputs of BenchmarkParse, each about n bytes: one long
// string, many small objects (as the root's BenchmarkInputSize), and prose
// with escapes and non-ASCII text (the slow path of strings), and one long
// string with many escapes.
func shapes(n int) []struct{ name, input string } {
	str := fmt.Sprintf(`{"message":%q}`, strings.Repeat("a", max(1, n-14)))
	const item = `{"id":123,"ok":true,"tag":"abc"}`
	items := max(1, (n-40)/(len(item)+1))
	obj := `{"message":"m","data":[` + strings.TrimSuffix(strings.Repeat(item+",", items), ",") + `]}`
	const line = `"Grüße, \"world\"\n\tnaïve café — 10 €\u00e9",`
	lines := max(1, (n-4)/len(line))
	text := `[` + strings.TrimSuffix(strings.Repeat(line, lines), ",") + `]`
	// One long string with an escape every 40 bytes: each run between two
	// escapes is read on its own, not to the closing quote far away.
	esc := `"` + strings.Repeat(strings.Repeat("e", 38)+`\n`, max(1, (n-2)/40)) + `"`
	return []struct{ name, input string }{{"string", str}, {"objects", obj}, {"text", text}, {"escaped", esc}}
}

// BenchmarkParse compares Parse with encoding/json's Decoder (UseNumber,
// then a check for trailing data: what maiden used before) and with Scan
// (ParseStrict's checks, building nothing) on the same inputs in the same
// run; MB/s is the input's size over the parse's time (wall; cpu-MB/s
// over the process's CPU time).
//
//	go test -run '^$' -bench Parse ./internal/jsonparse/
func BenchmarkParse(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}} {
		for _, shape := range shapes(size.n) {
			for _, impl := range []struct {
				name  string
				parse func(string) (any, error)
			}{{"jsonparse", jsonparse.Parse}, {"encoding_json", reference}, {"scan", scan}} {
				b.Run(size.name+"/"+shape.name+"/"+impl.name, func(b *testing.B) {
					b.SetBytes(int64(len(shape.input)))
					b.ReportAllocs()
					start := cpuclock.Now()
					for b.Loop() {
						if _, err := impl.parse(shape.input); err != nil {
							b.Fatal(err)
						}
					}
					// The process's CPU time, besides the wall time: on
					// a machine others share, the wall time includes
					// waiting for a core.
					if per := float64(cpuclock.Now()-start) / float64(b.N); per > 0 {
						b.ReportMetric(float64(len(shape.input))/per*1e3, "cpu-MB/s")
					}
				})
			}
		}
	}
}

// scan is Scan under testLimits, as the benchmark's parse.
func scan(s string) (any, error) {
	_, err := jsonparse.Scan(s, testLimits)
	return nil, err
}
