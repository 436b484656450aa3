package config_test

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/maiden-run/maiden/config"
)

func ExampleLoad() {
	cfg, err := config.Load("testdata/good.toml")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range cfg.Tools() {
		rel, _ := filepath.Rel(cfg.Dir(), t.Path)
		fmt.Printf("%s: %s timeout=%v memory=%dMiB allow=%q\n", t.Name, filepath.ToSlash(rel), t.Timeout, t.MemoryBytes>>20, t.HTTPAllow)
	}
	// Output:
	// news: tools/news.wasm timeout=5s memory=64MiB allow=["news.example"]
	// weather: tools/weather.wasm timeout=2.5s memory=128MiB allow=["api.weather.example" "*.tiles.example" "127.0.0.1" "::1"]
}

func ExampleLoad_errors() {
	_, err := config.Load("testdata/several_problems.toml")
	var errs config.Errors
	if errors.As(err, &errs) {
		for _, e := range errs[:4] {
			fmt.Println(e)
		}
	}
	// Output:
	// testdata/several_problems.toml: version: required key is missing; add "version = 1" at the top
	// testdata/several_problems.toml:1: owner: unknown key; valid keys here: version, tools, max_input_bytes, agents, state, secrets, middleware, operators, clis, mcp, require_signatures, trace
	// testdata/several_problems.toml:3: tools.weather.path: required key is missing
	// testdata/several_problems.toml:4: tools.weather.memory_mb: must be an integer in 1..4096, got 99999
}

func ExampleMatchHost() {
	pattern, _ := config.NormalizeHostPattern("*.Tiles.Example.")
	fmt.Println(pattern)
	fmt.Println(config.MatchHost(pattern, "a.tiles.example"))
	fmt.Println(config.MatchHost(pattern, "tiles.example"))
	fmt.Println(config.MatchHost(pattern, "a.b.tiles.example"))
	// Output:
	// *.tiles.example
	// true
	// false
	// false
}
