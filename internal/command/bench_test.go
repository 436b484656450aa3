package command

import (
	"testing"

	"github.com/maiden-run/maiden/internal/grant"
)

var benchInput = []byte(`{"command":"log","max-count":5,"oneline":true,"author":["a","b"],"paths":["README.md","docs"]}`)

// BenchmarkRenderJSON is the baseline: what a JSON tool's call costs the
// pipeline today (grant.Render of the same input).
func BenchmarkRenderJSON(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := grant.Render(benchInput); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseJSONTarget: a command call's parse, validation and grant
// target.
func BenchmarkParseJSONTarget(b *testing.B) {
	s := loadGit(b)
	b.ReportAllocs()
	for b.Loop() {
		inv, err := s.ParseJSON(benchInput)
		if err != nil {
			b.Fatal(err)
		}
		_ = inv.Target("git")
	}
}

// BenchmarkParseJSONArgv: the same and the wrapped CLI's argv.
func BenchmarkParseJSONArgv(b *testing.B) {
	s := loadGit(b)
	b.ReportAllocs()
	for b.Loop() {
		inv, err := s.ParseJSON(benchInput)
		if err != nil {
			b.Fatal(err)
		}
		_ = inv.Target("git")
		_ = inv.Argv(StyleEquals)
	}
}
