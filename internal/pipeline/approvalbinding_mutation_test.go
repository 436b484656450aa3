package pipeline

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
)

// TestApprovalPolicyCarriesEveryGrantOfAuthority: the policy an approval
// is bound to (basePolicy) differs from a plain tool's for each thing a
// reload may add to the tool: an approval given for a tool that could
// reveal no secret, write no file, reach no address range does not
// cover the same tool once it can.
func TestApprovalPolicyCarriesEveryGrantOfAuthority(t *testing.T) {
	t.Parallel()
	logger := testkit.Component(t, "logger")
	dir := t.TempDir()
	cfg := testConfig(t, dir, fmt.Sprintf(`version = 1
[tools.plain]
path = %[1]q
secrets = ["KEY"]
[tools.reveal]
path = %[1]q
secrets = ["KEY"]
reveal = ["KEY"]
[tools.fs]
path = %[1]q
secrets = ["KEY"]
fs = "write"
[tools.cidrs]
path = %[1]q
secrets = ["KEY"]
http_allow_cidrs = ["10.0.0.0/8"]
`, logger))
	policy := func(name string) (ApprovalPolicy, string) {
		t.Helper()
		tool, ok := cfg.Tool(name)
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		p := basePolicy(cfg, tool)
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return p, string(b)
	}
	_, plain := policy("plain")
	for _, c := range []struct {
		name string
		has  func(ApprovalPolicy) bool
	}{
		{"reveal", func(p ApprovalPolicy) bool { return len(p.Reveal) == 1 && p.Reveal[0] == "KEY" }},
		{"fs", func(p ApprovalPolicy) bool { return p.FS == "write" }},
		{"cidrs", func(p ApprovalPolicy) bool { return len(p.CIDRs) == 1 && p.CIDRs[0] == "10.0.0.0/8" }},
	} {
		p, text := policy(c.name)
		if !c.has(p) || text == plain {
			t.Errorf("tool %s: the approval's policy %s does not carry its %s (a plain tool's: %s)", c.name, text, c.name, plain)
		}
	}
}

// TestEnvNamesShowNoValues: what a human approving a wrapped CLI sees of
// its environment is the variables' names, never their values.
func TestEnvNamesShowNoValues(t *testing.T) {
	t.Parallel()
	got := envNames([]string{"API_KEY=hunter2", "PATH", "EMPTY="})
	if fmt.Sprint(got) != "[API_KEY PATH EMPTY]" {
		t.Errorf("envNames = %q; want the names only: [API_KEY PATH EMPTY]", got)
	}
}
