package clitool

import (
	"slices"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/command"
)

// TestEnvAndSpec: a wrapped CLI gets exactly its allowlist (set values,
// and named variables from this process), its secrets by name, and never
// a variable an option falls back to: that value reaches the program only
// as the argument rendered (and authorized) from it.
func TestEnvAndSpec(t *testing.T) {
	spec, err := command.Load([]byte(`{"maiden_command":1,"name":"t","options":[{"name":"token","env":"T_TOKEN"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FROM_HOST", "yes")
	t.Setenv("T_TOKEN", "from-host")
	tool := config.Tool{Name: "t", Path: "/bin/t", Secrets: []string{"KEY"}, CLI: &config.CLI{
		Command: spec,
		Env:     []string{"A=1", "FROM_HOST", "UNSET_HERE", "T_TOKEN=abc"},
	}}
	env, err := Env(tool, func(name string) (string, bool) { return "s3cret", name == "KEY" })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"A=1", "FROM_HOST=yes", "KEY=s3cret"}; !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}
	if _, err := Env(tool, func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), "MAIDEN_SECRET_KEY") {
		t.Errorf("a secret with no value: %v, want the variable to set", err)
	}
	inv, err := Spec(tool.CLI).ParseJSON([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.String(); got != "--token=abc" {
		t.Errorf("rendering %q, want the fallback from agent.toml's env rendered: --token=abc", got)
	}
	desc, schema, digest := Describe(tool)
	if !strings.Contains(desc, "/bin/t") || !strings.Contains(schema, `"token"`) || !strings.HasPrefix(digest, "cli:") {
		t.Errorf("Describe: %q %q %q", desc, schema, digest)
	}
}

// TestEnvRefusesSecretFallback: a secret named like an option's env
// fallback would reach the program as that option's value while the call's
// rendering (what the cards decide on) shows no such option; Env refuses
// it (config refuses it at load, this is the same rule for a Tool built
// without config).
func TestEnvRefusesSecretFallback(t *testing.T) {
	spec, err := command.Load([]byte(`{"maiden_command":1,"name":"t","options":[{"name":"token","env":"T_TOKEN"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tool := config.Tool{Name: "t", Path: "/bin/t", Secrets: []string{"T_TOKEN"}, CLI: &config.CLI{Command: spec}}
	inv, err := Spec(tool.CLI).ParseJSON([]byte(`{}`))
	if err != nil || inv.String() != "" {
		t.Fatalf("rendering %v %v: the cards see no --token", inv, err)
	}
	env, err := Env(tool, func(name string) (string, bool) { return "s3cret", name == "T_TOKEN" })
	if err == nil || !strings.Contains(err.Error(), "t: secret T_TOKEN is also an option's env fallback: the program would read it as that option's value, which no card sees") {
		t.Fatalf("Env = %q, %v; want the secret refused as an option's fallback", env, err)
	}
}
