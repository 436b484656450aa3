package examples_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestTextkit is the command-tree example (examples/textkit, the Go SDK's
// maiden.Commands) through the maiden command: calls of nested commands
// and defaults, a value out of range and an undeclared option refused by
// name (exit 2, kind input), and maiden help for the tool and a command.
func TestTextkit(t *testing.T) {
	t.Parallel()
	built(t, "textkit")
	cfg := exampleConfig(t) // builds every example first: call's deadline is for the call
	for in, want := range map[string]string{
		`{"command":"count","unit":"words","text":"a b c"}`:    `{"count":3,"unit":"words"}`,
		`{"command":"count","text":"héllo"}`:                   `{"count":5,"unit":"chars"}`,
		`{"command":"base64 encode","text":"hi"}`:              `{"text":"aGk="}`,
		`{"command":"base64 decode","url":true,"text":"Pz8-"}`: `{"text":"??>"}`,
		`{"command":"repeat","times":2,"text":"ab"}`:           `{"text":"ab ab"}`,
	} {
		if r := call(t, "textkit", in); r.code != 0 || r.stdout != want+"\n" {
			t.Errorf("textkit %s: exit %d, stdout %q, stderr %q", in, r.code, r.stdout, r.stderr)
		}
	}
	for in, name := range map[string]string{
		`{"command":"repeat","times":0,"text":"ab"}`: "times",
		`{"command":"count","text":"x","shout":1}`:   "shout",
		`{"command":"base64"}`:                       "base64",
	} {
		if r := call(t, "textkit", in); r.code != 2 || !strings.Contains(r.stderr, name) {
			t.Errorf("textkit %s: exit %d, stderr %q, want 2 naming %s", in, r.code, r.stderr, name)
		}
	}
	// A bound for a hang, not a performance claim: help loads the tool in a
	// worker, which on a loaded 2-core machine took over two minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if r := maidenCmd(ctx, "help", "-config", cfg, "textkit", "base64", "decode"); r.code != 0 || !strings.Contains(r.stdout, "textkit base64 decode") || !strings.Contains(r.stdout, "--url") {
		t.Errorf("help textkit base64 decode: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := maidenCmd(ctx, "help", "-config", cfg, "textkit"); r.code != 0 || !strings.Contains(r.stdout, "repeat") {
		t.Errorf("help textkit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
