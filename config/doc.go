// Package config turns an agent.toml file into a validated, immutable
// [Config]: the per-tool policy maiden enforces when it runs a tool.
//
// A minimal agent.toml:
//
//	version = 1
//
//	[tools.weather]
//	path = "tools/weather.wasm"
//	http_allow = ["api.weather.example", "*.tiles.example"]
//	secrets = ["WEATHER_TOKEN"]
//
// Loading it:
//
//	cfg, err := config.Load("agent.toml")
//	if err != nil {
//		// err is a config.Errors listing every problem, one per line:
//		// agent.toml:7: tools.weather.memory_mb: must be an integer in 1..4096, got 0
//		return err
//	}
//	for _, t := range cfg.Tools() {
//		fmt.Println(t.Name, t.Path, t.Timeout)
//	}
//
// The loader walks the TOML document itself rather than decoding into a
// struct, so that it can report every problem at once, each with the line of
// the offending key or value; `maiden check` relies on that. Everything a tool
// may do is denied unless the file says otherwise, and every omitted knob has
// a conservative default (see the Default* constants).
package config
