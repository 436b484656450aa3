// Package compare measures maiden side by side with what a user would pick
// instead: Extism's Go SDK, bare wazero, and no sandbox at all (a Go
// function, a Go MCP tool), on the same workloads, in the same run. It is a
// separate module so that Extism and wazero never become dependencies of
// maiden itself.
//
// The benchmarks are in compare_test.go; `./run` runs every configuration
// in its own process, several rounds, and prints one table (cmd/table):
//
//	./run                 # full run, ~4 minutes
//	BENCH_QUICK=1 ./run   # ~1.5 minutes
//	go test ./...         # smoke test: every configuration once, outputs checked
//
// This file defines the workloads: their inputs and the outputs every
// implementation must return.
package compare

import (
	"fmt"
	"strings"
)

// EchoInput is workload "echo"'s input; the output is the same text.
const EchoInput = `{"message":"hello"}`

// JSONTarget is the output of workload "json" on JSONInput(): the raw JSON
// text of the input's top-level "target" member.
const JSONTarget = `"needle-3f9a-found"`

// CPUOutput is workload "cpu"'s output: what the loop of
// testdata/tools/cpuloop.wat (10^8 multiply-adds) computes, as Go computes
// it too (see TestCPUOutput).
const CPUOutput = "9932821227141829761"

// JSONInput returns workload "json"'s input: a JSON object of about 10 KB,
// the same bytes every time. The member to find comes last, so every
// implementation reads the whole input; before it come decoys a sloppy scan
// would take: a nested "target", a string value "target", and strings
// holding quotes, braces and brackets.
func JSONInput() string {
	var b strings.Builder
	b.WriteString(`{"label":"target","items":[`)
	for i := 0; ; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"item-%03d","price":%d.%02d,"in_stock":%t,"tags":["t%d","u%d"],`+
			`"note":"a \"quoted\" {brace} [bracket] \\ back \u00e9"}`,
			i, i, 3+i%17, (i*37)%100, i%3 != 0, i%7, i%11)
		if b.Len() >= 9900 {
			break
		}
	}
	b.WriteString(`],"meta":{"target":"decoy","version":2},"target":` + JSONTarget + `}`)
	return b.String()
}
