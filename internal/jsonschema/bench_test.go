package jsonschema

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkValidate measures input validation at the limits, against a
// normal small input (small). The worst-* cases are the longest validations
// the work limits allow, whatever the deadline: each runs until a limit
// ends it. pattern-step is the longest step between two stop checks, i.e.
// how long an abandoned validation may run on after its call's context
// ends. Run:
//
//	go test -bench Validate -run '^$' ./internal/jsonschema/
func BenchmarkValidate(b *testing.B) {
	const mib = 1 << 20
	// fill repeats item, comma-separated, up to about n bytes.
	fill := func(item string, n int) string {
		return strings.TrimSuffix(strings.Repeat(item+",", n/(len(item)+1)), ",")
	}
	bigEnum := func() string { // 1,000 values of 250 bytes: the schema size limit
		vals := make([]string, maxEnumValues)
		for i := range vals {
			vals[i] = fmt.Sprintf(`"%s%04d"`, strings.Repeat("v", 246), i)
		}
		return "[" + strings.Join(vals, ",") + "]"
	}
	worstPattern := `(?:[a-y]?){998}z` // ~2,000 instructions, every thread alive
	smallSchema := `{"type":"object","properties":{"city":{"type":"string","description":"city name, e.g. Paris"},"units":{"type":"string","description":"metric (default) or imperial"}},"required":["city"]}`
	for _, bc := range []struct {
		name, schema, input string
		deadline            bool
	}{
		{name: "small", schema: smallSchema, input: `{"city":"Paris","units":"metric"}`},
		{name: "small-deadline", schema: smallSchema, input: `{"city":"Paris","units":"metric"}`, deadline: true},
		{
			// The most values a 1 MiB input holds, all fitting.
			name:   "items-1MiB-valid",
			schema: objectSchema(`"a":{"type":"array","items":{"type":"integer"}}`),
			input:  `{"a":[` + fill("1", mib) + `]}`,
		},
		{
			// ...all wrong: past the explain limit, reported without locations.
			name:   "items-1MiB-wrong",
			schema: objectSchema(`"a":{"type":"array","items":{"type":"string"}}`),
			input:  `{"a":[` + fill("1", mib) + `]}`,
		},
		{
			// Every item compared with 1,000 values of 250 bytes, all wrong:
			// the 189 MB report of before.
			name:   "enum-1MiB-wrong",
			schema: objectSchema(`"a":{"type":"array","items":{"enum":` + bigEnum() + `}}`),
			input:  `{"a":[` + fill(`"`+strings.Repeat("v", 246)+`xxxx"`, mib) + `]}`,
		},
		{
			// ~5,000 properties (the subschema limit), each checked.
			name:   "wide-1MiB",
			schema: wide(maxSubschemas - 10),
			input: func() string {
				var ps []string
				for i := range maxSubschemas - 10 {
					ps = append(ps, fmt.Sprintf(`"p%d":[%s]`, i, fill("1", mib/maxSubschemas-12)))
				}
				return "{" + strings.Join(ps, ",") + "}"
			}(),
		},
		{
			// 2,048 alternatives, each checking every item of a 200 KB array
			// and failing at the last: runs until the check limit.
			name:   "worst-checks",
			schema: strings.Replace(doubling(11), `{"type":"string"}`, `{"type":"array","items":{"type":"integer"}}`, 1),
			input:  `{"x":[` + strings.Repeat("1,", 100000) + `"no"]}`,
		},
		{
			// The worst pattern over a 1 MiB string: runs until the match
			// limit.
			name:   "worst-match",
			schema: objectSchema(`"a":{"type":"string","pattern":"` + worstPattern + `"}`),
			input:  `{"a":"` + strings.Repeat("a", mib) + `"}`,
		},
		{
			// The longest step between stop checks: the worst pattern over
			// one chunk.
			name:   "pattern-step",
			schema: objectSchema(`"a":{"type":"string","pattern":"` + worstPattern + `"}`),
			input:  `{"a":"` + strings.Repeat("a", matchChunk) + `"}`,
		},
		{
			// An ordinary pattern over a 1 MiB string.
			name:   "pattern-1MiB-ordinary",
			schema: objectSchema(`"a":{"type":"string","pattern":"^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$"}`),
			input:  `{"a":"` + strings.Repeat("a", mib) + `"}`,
		},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := mustCompile(b, bc.schema)
			v := mustParse(b, bc.input)
			ctx := context.Background()
			if bc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			b.SetBytes(int64(len(bc.input)))
			b.ReportAllocs()
			var last error
			for b.Loop() {
				last = s.validateCtx(ctx, v)
			}
			if last != nil && len(last.Error()) > maxReportBytes {
				b.Fatalf("report is %d bytes", len(last.Error()))
			}
		})
	}
}
