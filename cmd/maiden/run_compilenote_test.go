package main

import (
	"io"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestCallAnnouncesACompile: on a terminal, maiden call says which
// component it is compiling before the wait (a JS tool's first call was 10
// to 20 silent seconds), in process and in a worker; not when the code
// came from the cache, and never on a pipe or a file. (Not parallel: it
// replaces writerIsTerminal.)
func TestCallAnnouncesACompile(t *testing.T) {
	cfg := agentTOML(t, map[string]string{"echo": ""})
	echo := testkit.Component(t, "echo")
	note := "maiden: compiling " + echo + " for this machine (its first use; the result is cached)\n"
	defer func(f func(io.Writer) bool) { writerIsTerminal = f }(writerIsTerminal)
	for _, iso := range []string{"process", "workers"} {
		t.Run(iso, func(t *testing.T) {
			cache := t.TempDir()
			writerIsTerminal = func(io.Writer) bool { return false }
			if r := cli(t, "", "call", "-config", cfg, "-cache", cache, "-isolation", iso, "echo", `{"message":"hi"}`); r.code != exitOK || strings.Contains(r.stderr, "compiling") {
				t.Fatalf("not a terminal: exit %d, stderr %q; want no note", r.code, r.stderr)
			}
			cache = t.TempDir()
			writerIsTerminal = func(io.Writer) bool { return true }
			r := cli(t, "", "call", "-config", cfg, "-cache", cache, "-isolation", iso, "echo", `{"message":"hi"}`)
			if r.code != exitOK || !strings.HasPrefix(r.stderr, note) || strings.Count(r.stderr, "compiling") != 1 {
				t.Fatalf("first call: exit %d, stderr %q; want it to start with %q, once", r.code, r.stderr, note)
			}
			if r := cli(t, "", "call", "-config", cfg, "-cache", cache, "-isolation", iso, "echo", `{"message":"hi"}`); r.code != exitOK || strings.Contains(r.stderr, "compiling") {
				t.Errorf("second call: exit %d, stderr %q; want no note (the code is cached)", r.code, r.stderr)
			}
		})
	}
}
