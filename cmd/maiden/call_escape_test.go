package main

import (
	"strings"
	"testing"
)

// TestCallEscapesToolText: `maiden call` shows a tool's log lines and its
// error message on the operator's terminal (stderr) with every control
// character escaped: a tool cannot set the window title, hide text, clear
// the screen or print a line that looks like maiden's own.
func TestCallEscapesToolText(t *testing.T) {
	t.Parallel()
	cfg := agentTOML(t, map[string]string{"ansilog": ""})
	r := cli(t, "", "call", "-config", cfg, "-cache", t.TempDir(), "-isolation", "process", "ansilog", "{}")
	if r.code != exitTool {
		t.Fatalf("exit %d, want %d (tool): %+v", r.code, exitTool, r)
	}
	for _, want := range []string{
		`[info] title\x1b]0;owned\a hidden\x1b[8m\nmaiden: echo approved` + "\n",
		`maiden: ansilog failed (tool): bad\x1b[2J input` + "\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q, want it to hold %q", r.stderr, want)
		}
	}
	if strings.ContainsAny(r.stderr, "\x1b\a") || strings.Contains(r.stderr, "\nmaiden: echo approved") {
		t.Errorf("a control character of the tool's reached the terminal raw: %q", r.stderr)
	}
}
