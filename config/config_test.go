package config

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// errorLines returns the messages of an Errors, failing the test for any
// other kind of error.
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T) is not an Errors", err, err)
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	return lines
}

func TestLoadBadFiles(t *testing.T) {
	const expected = `; expected a host name like "api.example.com", a wildcard like "*.example.com", or an IP address`
	tests := []struct {
		file string
		want []string
	}{
		{"bad_memory_range.toml", []string{
			"bad_memory_range.toml:5: tools.weather.memory_mb: must be an integer in 1..4096, got 0",
		}},
		{"bad_timeout_range.toml", []string{
			"bad_timeout_range.toml:5: tools.weather.timeout_ms: must be an integer in 1..600000, got 600_001",
		}},
		{"bad_response_range.toml", []string{
			"bad_response_range.toml:5: tools.weather.http_max_response_bytes: must be an integer in 1..67108864, got 67108865",
		}},
		{"unknown_key.toml", []string{
			"unknown_key.toml:2: name: unknown key; valid keys here: version, tools, max_input_bytes, agents, state, secrets, middleware, operators, clis, mcp, require_signatures, trace",
			`unknown_key.toml:6: tools.weather.memroy_mb: unknown key (did you mean "memory_mb"?)`,
		}},
		{"duplicate_tool.toml", []string{
			`duplicate_tool.toml:6: tools.weather_api: duplicate tool: same name as "weather-api" on line 3 (names are compared ignoring case and '-' vs '_')`,
		}},
		{"duplicate_key.toml", []string{
			"duplicate_key.toml:5: tools.weather.path: duplicate key: first defined on line 4",
		}},
		{"duplicate_table.toml", []string{
			"duplicate_table.toml:6: tools.weather: duplicate table: first defined on line 3",
		}},
		{"wrong_type.toml", []string{
			`wrong_type.toml:5: tools.weather.memory_mb: must be an integer in 1..4096, got string "64"`,
			`wrong_type.toml:6: tools.weather.secrets: must be an array of strings, got string "WEATHER_TOKEN"`,
		}},
		{"float_for_int.toml", []string{
			"float_for_int.toml:5: tools.weather.timeout_ms: must be an integer in 1..600000, got float 5000.0 (write it as 5000: floats are not allowed)",
		}},
		{"missing_file.toml", []string{
			`missing_file.toml:4: tools.weather.path: file not found: "tools/nope.wasm"`,
		}},
		{"path_is_directory.toml", []string{
			`path_is_directory.toml:4: tools.weather.path: is a directory: "tools"`,
		}},
		{"missing_path.toml", []string{
			"missing_path.toml:3: tools.weather.path: required key is missing",
		}},
		{"missing_version.toml", []string{
			`missing_version.toml: version: required key is missing; add "version = 1" at the top`,
		}},
		{"bad_version.toml", []string{
			"bad_version.toml:1: version: unsupported version 2; supported versions: 1",
		}},
		{"bad_host_pattern.toml", []string{
			`bad_host_pattern.toml:6: tools.weather.http_allow[0]: invalid host pattern "https://api.weather.example": must be a host name, not a URL` + expected,
			`bad_host_pattern.toml:7: tools.weather.http_allow[1]: invalid host pattern "*.com": a wildcard must be followed by at least two labels, as in "*.example.com"` + expected,
			`bad_host_pattern.toml:8: tools.weather.http_allow[2]: invalid host pattern "a.*.example": '*' is only allowed as the whole first label, as in "*.example.com"` + expected,
			`bad_host_pattern.toml:9: tools.weather.http_allow[3]: invalid host pattern "api.weather.example:443": must not contain a port` + expected,
			`bad_host_pattern.toml:10: tools.weather.http_allow[4]: invalid host pattern "*": a bare '*' would allow every host` + expected,
		}},
		{"duplicate_host.toml", []string{
			`duplicate_host.toml:5: tools.weather.http_allow[1]: duplicate entry "api.weather.example" (same as [0])`,
		}},
		{"bad_secret.toml", []string{
			`bad_secret.toml:5: tools.weather.secrets[0]: invalid secret name "weather_token": must be 1 to 128 characters of A-Z, 0-9 and '_', starting with a letter`,
			`bad_secret.toml:5: tools.weather.secrets[2]: duplicate entry "TOKEN" (same as [1])`,
		}},
		{"bad_tool_name.toml", []string{
			`bad_tool_name.toml:3: tools.Weather: invalid tool name "Weather": must be 1 to 64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit`,
		}},
		{"array_of_tools.toml", []string{
			"array_of_tools.toml:3: tools: must be a table of tools, got an array of tables (write [tools.NAME], not [[tools]])",
		}},
		{"syntax_error.toml", []string{
			"syntax_error.toml:4: syntax error at column 27: basic strings cannot have new lines",
		}},
		{"bad_port.toml", []string{
			"bad_port.toml:5: tools.weather.http_ports[0]: must be an integer in 1..65535, got 0",
			"bad_port.toml:5: tools.weather.http_ports[1]: must be an integer in 1..65535, got 70000",
			"bad_port.toml:5: tools.weather.http_ports[3]: duplicate entry 8443 (same as [2])",
		}},
		{"bad_cidr.toml", []string{
			`bad_cidr.toml:5: tools.weather.http_allow_cidrs[0]: invalid address range "10.0.0.0/33": expected CIDR notation like "10.0.0.0/8" or "fd00::/8"`,
			`bad_cidr.toml:5: tools.weather.http_allow_cidrs[1]: invalid address range "localhost": expected CIDR notation like "10.0.0.0/8" or "fd00::/8"`,
			`bad_cidr.toml:5: tools.weather.http_allow_cidrs[3]: duplicate entry "10.0.0.0/8" (same as [2])`,
		}},
		{"bad_ca_file.toml", []string{
			`bad_ca_file.toml:5: tools.weather.http_ca_files[0]: file not found: "certs/missing.pem"`,
			`bad_ca_file.toml:5: tools.weather.http_ca_files[1]: no PEM certificate (-----BEGIN CERTIFICATE-----) found in "certs/not_a_cert.pem"`,
		}},
		{"tool_not_table.toml", []string{
			`tool_not_table.toml:4: tools.weather: must be a table, got string "tools/weather.wasm"`,
		}},
		{"extend_inline_table.toml", []string{
			"extend_inline_table.toml:5: tools.weather: cannot add keys to the inline table defined on line 4",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := "testdata/" + tt.file
			cfg, err := Load(path)
			if err == nil {
				t.Fatalf("Load(%q) = %+v, want errors", path, cfg.Tools())
			}
			if cfg != nil {
				t.Errorf("Load(%q) returned a Config along with errors", path)
			}
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = "testdata/" + w
			}
			if diff := cmp.Diff(want, errorLines(t, err)); diff != "" {
				t.Errorf("Load(%q) errors mismatch (-want +got):\n%s", path, diff)
			}
		})
	}
}

func TestLoadReportsEveryProblemSortedByLine(t *testing.T) {
	const file = "testdata/several_problems.toml"
	_, err := Load(file)
	want := []string{
		file + `: version: required key is missing; add "version = 1" at the top`,
		file + ":1: owner: unknown key; valid keys here: version, tools, max_input_bytes, agents, state, secrets, middleware, operators, clis, mcp, require_signatures, trace",
		file + ":3: tools.weather.path: required key is missing",
		file + ":4: tools.weather.memory_mb: must be an integer in 1..4096, got 99999",
		file + `:5: tools.weather.http_allow[1]: invalid host pattern "https://tiles.example": must be a host name, not a URL; ` + expectedHostPattern,
		file + `:9: tools.news.secrets[0]: invalid secret name "news token": must be 1 to 128 characters of A-Z, 0-9 and '_', starting with a letter`,
		file + ":10: tools.news.timeout_ms: must be an integer in 1..600000, got float 1.5",
	}
	if diff := cmp.Diff(want, errorLines(t, err)); diff != "" {
		t.Errorf("errors mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(strings.Join(want, "\n"), err.Error()); diff != "" {
		t.Errorf("Error() mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadMissingConfig(t *testing.T) {
	_, err := Load("testdata/does_not_exist.toml")
	if diff := cmp.Diff([]string{"testdata/does_not_exist.toml: file not found"}, errorLines(t, err)); diff != "" {
		t.Errorf("errors mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadGood(t *testing.T) {
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load("testdata/good.toml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.File() != "testdata/good.toml" || cfg.Dir() != dir {
		t.Errorf("File(), Dir() = %q, %q; want %q, %q", cfg.File(), cfg.Dir(), "testdata/good.toml", dir)
	}
	want := []Tool{
		{
			Name:                 "news",
			Path:                 filepath.Join(dir, "tools/news.wasm"),
			Timeout:              DefaultTimeout,
			MemoryBytes:          DefaultMemoryMB << 20,
			HTTPAllow:            []string{"news.example"},
			HTTPMaxResponseBytes: DefaultMaxResponseBytes,
			Line:                 21,
		},
		{
			Name:                 "weather",
			Path:                 filepath.Join(dir, "tools/weather.wasm"),
			Timeout:              2500 * time.Millisecond,
			MemoryBytes:          128 << 20,
			HTTPAllow:            []string{"api.weather.example", "*.tiles.example", "127.0.0.1", "::1"},
			Secrets:              []string{"WEATHER_TOKEN", "TILES_KEY"},
			HTTPPorts:            []uint16{8443, 8080},
			HTTPAllowCIDRs:       []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
			HTTPCAFiles:          []string{filepath.Join(dir, "certs/ca.pem")},
			HTTPMaxResponseBytes: 1 << 20,
			Line:                 4,
		},
	}
	if diff := cmp.Diff(want, cfg.Tools(), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("Tools() mismatch (-want +got):\n%s", diff)
	}
	checkInvariants(t, cfg)
}

func TestDefaults(t *testing.T) {
	cfg, err := Load("testdata/minimal.toml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	got, ok := cfg.Tool("echo")
	if !ok {
		t.Fatal(`Tool("echo") not found`)
	}
	want := Tool{
		Name:                 "echo",
		Path:                 filepath.Join(cfg.Dir(), "tools", "weather.wasm"),
		Timeout:              5 * time.Second,
		MemoryBytes:          64 << 20,
		HTTPMaxResponseBytes: 2 << 20,
		Line:                 3,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults mismatch (-want +got):\n%s", diff)
	}
}

func TestNoTools(t *testing.T) {
	for _, src := range []string{"version = 1\n", "version = 1\n[tools]\n"} {
		cfg, err := Parse("agent.toml", []byte(src), t.TempDir())
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		if n := len(cfg.Tools()); n != 0 {
			t.Errorf("Parse(%q) has %d tools, want 0", src, n)
		}
	}
}

func TestRelativePaths(t *testing.T) {
	root := t.TempDir()
	cfgDir := filepath.Join(root, "agent")
	for _, f := range []string{"agent/tools/a.wasm", "shared/b.wasm", "abs/c.wasm", "agent/ca.pem"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile("testdata/certs/ca.pem")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	abs := filepath.Join(root, "abs", "c.wasm")
	src := `version = 1
[tools.a]
path = "tools/./a.wasm"
http_ca_files = ["ca.pem"]
[tools.b]
path = "../shared/b.wasm"
[tools.c]
path = "` + filepath.ToSlash(abs) + `"
`
	if err := os.WriteFile(filepath.Join(cfgDir, "agent.toml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(filepath.Join(cfgDir, "agent.toml"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	tests := []struct {
		tool, want string
	}{
		{"a", filepath.Join(cfgDir, "tools", "a.wasm")},
		{"b", filepath.Join(root, "shared", "b.wasm")},
		{"c", abs},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			tool, _ := cfg.Tool(tt.tool)
			if diff := cmp.Diff(tt.want, tool.Path); diff != "" {
				t.Errorf("Path mismatch (-want +got):\n%s", diff)
			}
		})
	}
	a, _ := cfg.Tool("a")
	if diff := cmp.Diff([]string{filepath.Join(cfgDir, "ca.pem")}, a.HTTPCAFiles); diff != "" {
		t.Errorf("HTTPCAFiles mismatch (-want +got):\n%s", diff)
	}

	// Parse resolves against the directory it is given, whatever the file name.
	cfg, err = Parse("elsewhere/agent.toml", []byte(src), cfgDir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if a, _ := cfg.Tool("a"); a.Path != filepath.Join(cfgDir, "tools", "a.wasm") || cfg.Dir() != cfgDir {
		t.Errorf("Parse resolved a to %q in %q, want it under %q", a.Path, cfg.Dir(), cfgDir)
	}
}

func TestToolsReturnsCopies(t *testing.T) {
	cfg, err := Load("testdata/good.toml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	before := cfg.Tools()

	mutate := func(ts []Tool) {
		for i := range ts {
			ts[i].Name = "mutated"
			ts[i].Timeout = time.Hour
			for j := range ts[i].HTTPAllow {
				ts[i].HTTPAllow[j] = "evil.example"
			}
			for j := range ts[i].Secrets {
				ts[i].Secrets[j] = "STOLEN"
			}
			for j := range ts[i].HTTPPorts {
				ts[i].HTTPPorts[j] = 22
			}
			for j := range ts[i].HTTPAllowCIDRs {
				ts[i].HTTPAllowCIDRs[j] = netip.MustParsePrefix("0.0.0.0/0")
			}
			for j := range ts[i].HTTPCAFiles {
				ts[i].HTTPCAFiles[j] = "/evil.pem"
			}
		}
	}
	mutate(cfg.Tools())
	w, _ := cfg.Tool("weather")
	mutate([]Tool{w})

	opt := cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })
	if diff := cmp.Diff(before, cfg.Tools(), opt); diff != "" {
		t.Errorf("mutating returned tools changed the config (-before +after):\n%s", diff)
	}
	if _, ok := cfg.Tool("mutated"); ok {
		t.Error(`Tool("mutated") found after mutating a copy`)
	}
}

func TestTool(t *testing.T) {
	cfg, err := Load("testdata/good.toml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	tests := []struct {
		name   string
		wantOK bool
	}{
		{"weather", true},
		{"news", true},
		{"Weather", false},
		{"", false},
		{"zzz", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := cfg.Tool(tt.name)
			if ok != tt.wantOK || (ok && got.Name != tt.name) {
				t.Errorf("Tool(%q) = %q, %v; want ok=%v", tt.name, got.Name, ok, tt.wantOK)
			}
		})
	}
}

// TestAnnotations reads a title and hint overrides, leaving unset hints nil
// (derived from the policy by the host).
func TestAnnotations(t *testing.T) {
	src := "version = 1\n[tools.w]\npath = \"w.wasm\"\ntitle = \"Wipe the disk\"\nannotations = { destructive = true, read_only = false }\n"
	cfg, err := parse("agent.toml", []byte(src), "/x", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := cfg.Tool("w")
	if w.Title != "Wipe the disk" {
		t.Errorf("title %q", w.Title)
	}
	a := w.Annotations
	if a.Destructive == nil || !*a.Destructive || a.ReadOnly == nil || *a.ReadOnly || a.Idempotent != nil || a.OpenWorld != nil {
		t.Errorf("annotations %+v", a)
	}
	// Tool returns a copy: changing it does not change the configuration.
	*a.Destructive = false
	if again, _ := cfg.Tool("w"); !*again.Annotations.Destructive {
		t.Error("Tool shares the annotations with the configuration")
	}
}

// fakeFiles pretends every path is a regular file holding a valid CA
// certificate, so tests can exercise syntax without creating files.
func fakeFiles(t testing.TB) fileSystem {
	ca, err := os.ReadFile("testdata/certs/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	return fileSystem{
		stat:     func(string) (fs.FileMode, error) { return 0, nil },
		readFile: func(string) ([]byte, error) { return ca, nil },
	}
}

// TestParseForms checks that the different ways TOML allows writing the
// same table all give the same tool.
func TestParseForms(t *testing.T) {
	want := Tool{
		Name:                 "w",
		Path:                 "/base/w.wasm",
		Timeout:              1234 * time.Millisecond,
		MemoryBytes:          64 << 20,
		HTTPAllow:            []string{"a.example"},
		HTTPMaxResponseBytes: DefaultMaxResponseBytes,
	}
	tests := []struct {
		name, src string
		line      int
	}{
		{"header", "version = 1\n[tools.w]\npath = \"w.wasm\"\ntimeout_ms = 1234\nhttp_allow = ['a.example']\n", 2},
		{"top-level dotted keys", "version = 1\ntools.w.path = \"w.wasm\"\ntools.w.timeout_ms = 1234\ntools.w.http_allow = [\"A.example.\"]\n", 2},
		{"dotted keys under [tools]", "version = 1\n[tools]\nw.path = \"w.wasm\"\nw.timeout_ms = 1234\nw.http_allow = [\"a.example\"]\n", 3},
		{"inline table", "version = 1\n[tools]\nw = { path = \"w.wasm\", timeout_ms = 1234, http_allow = [\"a.example\"] }\n", 3},
		{"quoted keys", "\"version\" = 1\n[\"tools\".'w']\n\"path\" = '''w.wasm'''\ntimeout_ms = 1234\nhttp_allow = [\"a.example\",]\n", 2},
		{"sub-table header after parent", "version = 1\n[tools]\n[tools.w]\npath = \"w.wasm\"\ntimeout_ms = 1234\nhttp_allow = [\"a.example\"]\n", 3},
		{"parent header after sub-table", "version = 1\n[tools.w]\npath = \"w.wasm\"\ntimeout_ms = 1234\nhttp_allow = [\"a.example\"]\n[tools]\n", 2},
		{"hex integer", "version = 0x1\n[tools.w]\npath = \"w.wasm\"\ntimeout_ms = 0x4d2\nhttp_allow = [\"a.example\"]\n", 2},
		{"octal integer", "version = 1\n[tools.w]\npath = \"w.wasm\"\ntimeout_ms = 0o2322\nhttp_allow = [\"a.example\"]\n", 2},
		{"binary integer", "version = 1\n[tools.w]\npath = \"w.wasm\"\ntimeout_ms = 0b100_1101_0010\nhttp_allow = [\"a.example\"]\n", 2},
		{"plus sign and underscores", "version = +1\n[tools.w]\npath = \"w.wasm\"\ntimeout_ms = +1_234\nhttp_allow = [\"a.example\"]\n", 2},
		{"CRLF, BOM and comments", "\uFEFF# agent\r\nversion = 1 # v\r\n[tools.w] # tool\r\npath = \"w.wasm\"\r\ntimeout_ms = 1234\r\nhttp_allow = [ # list\r\n  \"a.example\", # one\r\n]\r\n", 3},
		{"escaped string", "version = 1\n[tools.w]\npath = \"\\u0077.wasm\"\ntimeout_ms = 1234\nhttp_allow = [\"a.example\"]\n", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parse("agent.toml", []byte(tt.src), "/base", fakeFiles(t))
			if err != nil {
				t.Fatalf("parse:\n%v", err)
			}
			w := want
			w.Line = tt.line
			if diff := cmp.Diff([]Tool{w}, cfg.Tools()); diff != "" {
				t.Errorf("Tools() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseErrors covers TOML structure and type errors that need no file of
// their own.
func TestParseErrors(t *testing.T) {
	const head = "version = 1\n[tools.w]\npath = \"w.wasm\"\n" // tool w opens on line 2
	tests := []struct {
		name, src string
		want      []string
	}{
		{"version as string", "version = \"1\"\n", []string{
			`agent.toml:1: version: must be the integer 1, got string "1"`,
		}},
		{"version as float", "version = 1.0\n", []string{
			"agent.toml:1: version: must be the integer 1, got float 1.0 (write it as 1: floats are not allowed)",
		}},
		{"version overflow", "version = 99999999999999999999\n", []string{
			"agent.toml:1: version: unsupported version 99999999999999999999; supported versions: 1",
		}},
		{"tools not a table", "version = 1\ntools = 5\n", []string{
			"agent.toml:2: tools: must be a table of tools, got integer 5",
		}},
		{"tools as array of inline tables", "version = 1\ntools = [{ path = \"x\" }]\n", []string{
			"agent.toml:2: tools: must be a table of tools, got an array",
		}},
		{"array table for a tool", "version = 1\n[[tools.w]]\npath = \"w.wasm\"\n", []string{
			"agent.toml:2: tools.w: must be a table, got an array of tables",
		}},
		{"header after dotted keys", "version = 1\ntools.w.path = \"w.wasm\"\n[tools.w]\ntimeout_ms = 1\n", []string{
			"agent.toml:3: tools.w: duplicate table: already defined by dotted keys on line 2",
		}},
		{"dotted keys into a header table", "version = 1\n[tools.w.x]\n[tools]\nw.path = \"w.wasm\"\n", []string{
			"agent.toml:2: tools.w.x: unknown key; valid keys here: path, timeout_ms, memory_mb, http_allow, secrets, http_ports, http_allow_cidrs, http_ca_files, http_max_response_bytes, title, annotations, middleware, middleware_mode, cost, reveal, verify, registry_credential, schema",
			"agent.toml:2: tools.w.path: required key is missing",
			"agent.toml:4: tools.w: cannot add keys with a dotted key to the table defined by a [header] on line 2",
		}},
		{"key inside a string", head + "path.x = 1\n", []string{
			`agent.toml:4: tools.w.path: cannot add keys to string "w.wasm" defined on line 3`,
		}},
		{"key below a string", head + "secrets.x.y = 1\nsecrets = []\n", []string{
			`agent.toml:4: tools.w.secrets: must be an array of strings, got a table`,
			`agent.toml:5: tools.w.secrets: duplicate key: already defined as a table on line 4`,
		}},
		{"table below a value", head + "[tools.w.path.x]\n", []string{
			`agent.toml:4: tools.w.path: cannot add a table to string "w.wasm" defined on line 3`,
		}},
		{"header on a value", "version = 1\n[tools]\nw = 1\n[tools.w]\n", []string{
			"agent.toml:3: tools.w: must be a table, got integer 1",
			"agent.toml:4: tools.w: duplicate key: already defined as integer 1 on line 3",
		}},
		{"header on an inline table", "version = 1\n[tools]\nw = { path = \"w.wasm\" }\n[tools.w]\n", []string{
			"agent.toml:4: tools.w: duplicate table: already defined as an inline table on line 3",
		}},
		{"table inside an inline table", "version = 1\n[tools]\nw = { path = \"w.wasm\" }\n[tools.w.x]\n", []string{
			"agent.toml:4: tools.w: cannot add a table to the inline table defined on line 3",
		}},
		{"array table on a table", "version = 1\n[tools.w]\npath = \"w.wasm\"\n[[tools.w]]\n", []string{
			"agent.toml:4: tools.w: cannot define an array of tables: already defined as a table on line 2",
		}},
		{"duplicate key in inline table", "version = 1\n[tools]\nw = { path = \"a\", path = \"b\" }\n", []string{
			"agent.toml:3: tools.w.path: duplicate key: first defined on line 3",
		}},
		{"nested table in tool", head + "[tools.w.limits]\nmemory_mb = 1\n", []string{
			`agent.toml:4: tools.w.limits: unknown key; valid keys here: path, timeout_ms, memory_mb, http_allow, secrets, http_ports, http_allow_cidrs, http_ca_files, http_max_response_bytes, title, annotations, middleware, middleware_mode, cost, reveal, verify, registry_credential, schema`,
		}},
		{"quoted odd key", "version = 1\n[tools.\"a.b\"]\npath = \"w.wasm\"\n", []string{
			`agent.toml:2: tools."a.b": invalid tool name "a.b": must be 1 to 64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit`,
		}},
		{"tool name too long", "version = 1\n[tools." + strings.Repeat("a", 65) + "]\npath = \"w.wasm\"\n", []string{
			"agent.toml:2: tools." + strings.Repeat("a", 65) + `: invalid tool name "` + strings.Repeat("a", 64) + `"...: must be 1 to 64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit`,
		}},
		{"duplicate tool by case", "version = 1\n[tools.w]\npath = \"w.wasm\"\n[tools.W]\npath = \"w.wasm\"\n", []string{
			`agent.toml:4: tools.W: invalid tool name "W": must be 1 to 64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit`,
			`agent.toml:4: tools.W: duplicate tool: same name as "w" on line 2 (names are compared ignoring case and '-' vs '_')`,
		}},
		{"empty path", "version = 1\n[tools.w]\npath = \"\"\n", []string{
			"agent.toml:3: tools.w.path: must not be empty",
		}},
		{"path as array", "version = 1\n[tools.w]\npath = [\"w.wasm\"]\n", []string{
			"agent.toml:3: tools.w.path: must be a string, got an array",
		}},
		{"negative int", head + "memory_mb = -1\n", []string{
			"agent.toml:4: tools.w.memory_mb: must be an integer in 1..4096, got -1",
		}},
		{"bool for int", head + "memory_mb = true\n", []string{
			"agent.toml:4: tools.w.memory_mb: must be an integer in 1..4096, got boolean true",
		}},
		{"date for int", head + "memory_mb = 2024-01-01\n", []string{
			"agent.toml:4: tools.w.memory_mb: must be an integer in 1..4096, got date 2024-01-01",
		}},
		{"inf for int", head + "memory_mb = inf\n", []string{
			"agent.toml:4: tools.w.memory_mb: must be an integer in 1..4096, got float inf",
		}},
		{"exponent float for int", head + "timeout_ms = 1e3\n", []string{
			"agent.toml:4: tools.w.timeout_ms: must be an integer in 1..600000, got float 1e3 (write it as 1000: floats are not allowed)",
		}},
		{"int overflow", head + "http_max_response_bytes = 0x7fffffffffffffffff\n", []string{
			"agent.toml:4: tools.w.http_max_response_bytes: must be an integer in 1..67108864, got 0x7fffffffffffffffff",
		}},
		{"title not a string", head + "title = 5\n", []string{
			"agent.toml:4: tools.w.title: must be a string, got integer 5",
		}},
		{"title with a control character", head + "title = \"a\\u001bb\"\n", []string{
			`agent.toml:4: tools.w.title: must be printable text, but contains '\x1b'`,
		}},
		{"title too long", head + "title = \"" + strings.Repeat("é", 129) + "\"\n", []string{
			"agent.toml:4: tools.w.title: must be at most 128 characters, got 129",
		}},
		{"annotations not a table", head + "annotations = true\n", []string{
			"agent.toml:4: tools.w.annotations: must be a table such as { read_only = true }, got boolean true",
		}},
		{"annotation misspelt", head + "annotations = { readonly = true }\n", []string{
			`agent.toml:4: tools.w.annotations.readonly: unknown key (did you mean "read_only"?)`,
		}},
		{"annotation as string", head + "[tools.w.annotations]\nopen_world = \"no\"\n", []string{
			`agent.toml:5: tools.w.annotations.open_world: must be true or false, got string "no"`,
		}},
		{"table for int", head + "timeout_ms = { ms = 1 }\n", []string{
			"agent.toml:4: tools.w.timeout_ms: must be an integer in 1..600000, got an inline table",
		}},
		{"element types on their own lines", head + "http_allow = [\n  \"a.example\",\n  5,\n  [\"b.example\"],\n  { host = \"c.example\" },\n]\n", []string{
			"agent.toml:6: tools.w.http_allow[1]: must be a string, got integer 5",
			"agent.toml:7: tools.w.http_allow[2]: must be a string, got an array",
			"agent.toml:8: tools.w.http_allow[3]: must be a string, got an inline table",
		}},
		{"port as string", head + "http_ports = [\"8443\"]\n", []string{
			`agent.toml:4: tools.w.http_ports[0]: must be an integer in 1..65535, got string "8443"`,
		}},
		{"ports not an array", head + "http_ports = 8443\n", []string{
			"agent.toml:4: tools.w.http_ports: must be an array of integers, got integer 8443",
		}},
		{"cidr with zone", head + "http_allow_cidrs = [\"fe80::1%eth0/64\"]\n", []string{
			`agent.toml:4: tools.w.http_allow_cidrs[0]: invalid address range "fe80::1%eth0/64": expected CIDR notation like "10.0.0.0/8" or "fd00::/8"`,
		}},
		{"empty ca file", head + "http_ca_files = [\"\"]\n", []string{
			"agent.toml:4: tools.w.http_ca_files[0]: must not be empty",
		}},
		{"unknown key typo by case", "Version = 1\n", []string{
			`agent.toml: version: required key is missing; add "version = 1" at the top`,
			`agent.toml:1: Version: unknown key (did you mean "version"?)`,
		}},
		{"long string value is cut", head + "memory_mb = \"" + strings.Repeat("x", 100) + "\"\n", []string{
			`agent.toml:4: tools.w.memory_mb: must be an integer in 1..4096, got string "` + strings.Repeat("x", 64) + `"...`,
		}},
		{"syntax error keeps earlier problems, skips missing keys", "[tools.w]\nmemory_mb = 0\npath = \n", []string{
			"agent.toml:2: tools.w.memory_mb: must be an integer in 1..4096, got 0",
			"agent.toml:3: syntax error at column 8: unexpected character U+000A at start of value",
		}},
		{"syntax error at end", "version = 1\n[tools.w", []string{
			"agent.toml:2: syntax error at column 8: expected ']' to close table name",
		}},
		{"unquoted string", "version = 1\n[tools.w]\npath = w.wasm\n", []string{
			"agent.toml:3: syntax error at column 8: unexpected character U+0077 'w' at start of value",
		}},
		{"leading zero", "version = 01\n", []string{
			"agent.toml:1: syntax error at column 11: integers cannot have leading zeroes",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parse("agent.toml", []byte(tt.src), "/base", fakeFiles(t))
			if err == nil {
				t.Fatalf("parse succeeded with tools %+v, want errors", cfg.Tools())
			}
			if diff := cmp.Diff(tt.want, errorLines(t, err)); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// checkInvariants verifies what every successfully loaded Config promises.
func checkInvariants(t testing.TB, cfg *Config) {
	t.Helper()
	if !filepath.IsAbs(cfg.Dir()) {
		t.Errorf("Dir() = %q is not absolute", cfg.Dir())
	}
	tools := cfg.Tools()
	if !slices.IsSortedFunc(tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("Tools() not sorted by name")
	}
	folded := map[string]bool{}
	for i, tool := range tools {
		f := strings.ReplaceAll(strings.ToLower(tool.Name), "-", "_")
		if folded[f] {
			t.Errorf("tool %q duplicates another name", tool.Name)
		}
		folded[f] = true
		if !toolNameRE.MatchString(tool.Name) {
			t.Errorf("tool name %q is invalid", tool.Name)
		}
		if got, ok := cfg.Tool(tool.Name); !ok || !cmp.Equal(got, tools[i], cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })) {
			t.Errorf("Tool(%q) disagrees with Tools()", tool.Name)
		}
		if !filepath.IsAbs(tool.Path) || filepath.Clean(tool.Path) != tool.Path {
			t.Errorf("tool %q: path %q is not absolute and clean", tool.Name, tool.Path)
		}
		if tool.Timeout < MinTimeout || tool.Timeout > MaxTimeout || tool.Timeout%time.Millisecond != 0 {
			t.Errorf("tool %q: timeout %v out of range", tool.Name, tool.Timeout)
		}
		if tool.MemoryBytes < MinMemoryMB<<20 || tool.MemoryBytes > MaxMemoryMB<<20 || tool.MemoryBytes%(1<<20) != 0 {
			t.Errorf("tool %q: memory %d out of range", tool.Name, tool.MemoryBytes)
		}
		if tool.HTTPMaxResponseBytes < MinMaxResponseBytes || tool.HTTPMaxResponseBytes > MaxMaxResponseBytes {
			t.Errorf("tool %q: max response bytes %d out of range", tool.Name, tool.HTTPMaxResponseBytes)
		}
		seen := map[string]bool{}
		for _, p := range tool.HTTPAllow {
			if n, err := NormalizeHostPattern(p); err != nil || n != p {
				t.Errorf("tool %q: pattern %q re-normalises to %q, %v", tool.Name, p, n, err)
			}
			if seen[p] {
				t.Errorf("tool %q: duplicate pattern %q", tool.Name, p)
			}
			seen[p] = true
		}
		for _, s := range tool.Secrets {
			if !secretNameRE.MatchString(s) || seen["secret:"+s] {
				t.Errorf("tool %q: bad or duplicate secret %q", tool.Name, s)
			}
			seen["secret:"+s] = true
		}
		for _, p := range tool.HTTPPorts {
			if p == 0 || seen["port:"+string(rune(p))] {
				t.Errorf("tool %q: bad or duplicate port %d", tool.Name, p)
			}
			seen["port:"+string(rune(p))] = true
		}
		for _, p := range tool.HTTPAllowCIDRs {
			if !p.IsValid() || p != p.Masked() || seen["cidr:"+p.String()] {
				t.Errorf("tool %q: bad or duplicate prefix %v", tool.Name, p)
			}
			seen["cidr:"+p.String()] = true
		}
		for _, f := range tool.HTTPCAFiles {
			if !filepath.IsAbs(f) || filepath.Clean(f) != f {
				t.Errorf("tool %q: CA file %q is not absolute and clean", tool.Name, f)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*.toml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"version = 1\ntools.a.path = 'x'\ntools.a.http_allow = ['*.x.y', '[::1]']\n",
		"version = 1\n[tools]\na = { path = 'x', http_ports = [1, 65535], http_allow_cidrs = ['::/0'] }\n",
		"version = 1\n[[tools.a]]\n[tools.a.b]\n[[tools.a]]\n",
		"version = 1\n[a.b]\n[a]\nb.c = 1\n[a.b.c]\n",
		"version = 1\n[tools.a]\npath = 'x'\nhttp_ca_files = ['c', 'c']\n",
	} {
		f.Add([]byte(s))
	}
	files2 := fakeFiles(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parse("agent.toml", data, "/base", files2)
		if err != nil {
			var errs Errors
			if cfg != nil || !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("parse returned %v, %v (%T)", cfg, err, err)
			}
			lines := strings.Count(string(data), "\n") + 1
			for i, e := range errs {
				if e.File != "agent.toml" || e.Msg == "" || e.Line < 0 || e.Line > lines {
					t.Fatalf("malformed error %#v", e)
				}
				if i > 0 && errs[i-1].Line > e.Line {
					t.Fatalf("errors not sorted by line:\n%v", err)
				}
			}
			return
		}
		checkInvariants(t, cfg)
	})
}

func TestTooManyProblems(t *testing.T) {
	src := "version = 1\n" + strings.Repeat("bogus = 1\n", 500)
	_, err := parse("agent.toml", []byte(src), "/base", fakeFiles(t))
	lines := errorLines(t, err)
	if len(lines) != maxErrors+1 {
		t.Fatalf("got %d errors, want %d plus a note", len(lines), maxErrors)
	}
	want := []string{
		"agent.toml:2: bogus: unknown key; valid keys here: version, tools, max_input_bytes, agents, state, secrets, middleware, operators, clis, mcp, require_signatures, trace",
		"agent.toml:3: bogus: duplicate key: first defined on line 2",
	}
	if diff := cmp.Diff(want, lines[:2]); diff != "" {
		t.Errorf("first errors mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("agent.toml:101: too many problems; stopped after 100", lines[maxErrors]); diff != "" {
		t.Errorf("last error mismatch (-want +got):\n%s", diff)
	}
}

// TestHostileNesting makes sure deeply nested documents are rejected without
// exhausting the stack or taking quadratic time (each once took seconds).
func TestHostileNesting(t *testing.T) {
	tests := []struct {
		name, src string
		want      string
	}{
		{"arrays", "version = 1\na = " + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + "\n",
			"agent.toml:2: a: unknown key; valid keys here: version, tools, max_input_bytes, agents, state, secrets, middleware, operators, clis, mcp, require_signatures, trace"},
		{"inline tables", "version = 1\na = " + strings.Repeat("{b=", 9999) + "1" + strings.Repeat("}", 9999) + "\n",
			"agent.toml:2: a: unknown key; valid keys here: version, tools, max_input_bytes, agents, state, secrets, middleware, operators, clis, mcp, require_signatures, trace"},
		{"too deep", "version = 1\na = " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n",
			"agent.toml:2: syntax error at column 10005: arrays and inline tables are nested more than the maximum of 10000 levels deep"},
		{"dotted keys", "version = 1\n" + strings.Repeat("a.", 20000) + "b = 1\n",
			"agent.toml:2: a: unknown key; valid keys here: version, tools, max_input_bytes, agents, state, secrets, middleware, operators, clis, mcp, require_signatures, trace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse("agent.toml", []byte(tt.src), "/base", fakeFiles(t))
			if diff := cmp.Diff([]string{tt.want}, errorLines(t, err)); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
