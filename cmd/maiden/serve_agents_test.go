package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestServeIdentityFlags: who a server's callers are is settled before it
// starts: with [agents], stdio needs -agent naming a declared agent, and
// -http takes agent tokens only (-auth-token-env is refused, -agent has no
// meaning); without [agents], -agent may only name the implicit agent.
func TestServeIdentityFlags(t *testing.T) {
	implicit := agentTOML(t, map[string]string{"echo": ""})
	agents := agentTOML(t, map[string]string{"echo": ""})
	f, err := os.OpenFile(agents, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n[agents.research]\ntools = [\"echo\"]\n")
	f.Close()
	t.Setenv("MAIDEN_TEST_SERVE_TOKEN", "static-tok")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"stdio without -agent", []string{"-config", agents}, "name the one this stdio session runs as with -agent NAME"},
		{"stdio with an undeclared agent", []string{"-config", agents, "-agent", "ghost"}, `-agent ghost: no such agent`},
		{"http with a static token", []string{"-config", agents, "-http", "127.0.0.1:0", "-auth-token-env", "MAIDEN_TEST_SERVE_TOKEN"}, "use maiden agents token"},
		{"http with -agent", []string{"-config", agents, "-http", "127.0.0.1:0", "-agent", "research"}, "-agent is for stdio"},
		{"implicit with another agent", []string{"-config", implicit, "-agent", "research"}, "declares no [agents]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cmdServe(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), exitUsage, tc.want)
			}
		})
	}
}
