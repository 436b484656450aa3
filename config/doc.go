// Package config turns an agent.toml file into a validated, immutable
// [Config]: the per-tool policy maiden enforces when it runs a tool.
//
// A minimal agent.toml:
//
//	version = 1
//	max_input_bytes = 1048576 # optional: the largest call input (default 1 MiB, 1 KiB..64 MiB)
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
//
// Only regular files are read, agent.toml and the CA files it names alike,
// and at most MaxFileBytes of each (see ReadFile): a FIFO, a device such as
// /dev/zero or a /proc file is an error naming the file, never a hang or an
// unbounded read.
package config
