package config

import (
	"strings"
	"testing"
)

// TestToolFS reads a WebAssembly tool's fs key: absent is no filesystem.
func TestToolFS(t *testing.T) {
	src := `version = 1
[tools.none]
path = "n.wasm"
[tools.reader]
path = "r.wasm"
fs = "read"
[tools.writer]
path = "w.wasm"
fs = "write"
`
	cfg, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"none": FSNone, "reader": FSRead, "writer": FSWrite} {
		tool, ok := cfg.Tool(name)
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		if tool.FS != want {
			t.Errorf("%s: FS = %q, want %q", name, tool.FS, want)
		}
	}
}

// TestToolFSErrors: a bad value names the key and the line and says what
// is valid; a wrapped CLI has no fs key (its files are read_paths and
// write_paths).
func TestToolFSErrors(t *testing.T) {
	for _, tt := range []struct{ name, src, want string }{
		{"unknown value", "version = 1\n[tools.w]\npath = \"w.wasm\"\nfs = \"readwrite\"\n",
			`agent.toml:4: tools.w.fs: unknown filesystem access "readwrite"; valid values: "read" (read beneath the session boundary's directories), "write" (also write where the boundary allows it); leave fs out for no filesystem`},
		{"upper case", "version = 1\n[tools.w]\npath = \"w.wasm\"\nfs = \"READ\"\n", `agent.toml:4: tools.w.fs: unknown filesystem access "READ"`},
		{"boolean", "version = 1\n[tools.w]\npath = \"w.wasm\"\nfs = true\n", `agent.toml:4: tools.w.fs: must be a string`},
		{"empty", "version = 1\n[tools.w]\npath = \"w.wasm\"\nfs = \"\"\n", `agent.toml:4: tools.w.fs: must not be empty`},
		{"on a wrapped CLI", "version = 1\n[clis.git]\npath = \"/usr/bin/git\"\nfs = \"read\"\n", `agent.toml:4: clis.git.fs: unknown key`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse("agent.toml", []byte(tt.src), "/cfg", fakeFiles(t))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
		})
	}
}
