package grant

import "testing"

// TestSecretReveal: the secret:reveal class of secret handles (issue 14):
// parse and render, decide a reveal target, and attenuation. A reveal is
// its own verb: secret:use does not allow it and it does not allow use.
func TestSecretReveal(t *testing.T) {
	for _, s := range []string{"secret:reveal SIGNING_KEY", "secret:reveal GH_*", "secret:reveal *"} {
		g, err := Parse(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if g.String() != s {
			t.Errorf("%s renders as %s", s, g)
		}
	}
	if _, err := Parse("secret:reveal"); err == nil {
		t.Error("secret:reveal without a name parses")
	}
	if _, err := Parse("secret:reveal A B"); err == nil {
		t.Error("secret:reveal with two names parses")
	}
	for _, tc := range []struct {
		grant  string
		target Target
		want   bool
	}{
		{"secret:reveal SIGNING_KEY", SecretTarget("reveal", "SIGNING_KEY"), true},
		{"secret:reveal SIGNING_KEY", SecretTarget("reveal", "SIGNING_KEY_2"), false},
		{"secret:reveal SIGNING_KEY", SecretTarget("use", "SIGNING_KEY"), false},
		{"secret:use SIGNING_KEY", SecretTarget("reveal", "SIGNING_KEY"), false},
		{"secret:reveal GH_*", SecretTarget("reveal", "GH_TOKEN"), true},
		{"secret:reveal GH_*", SecretTarget("reveal", "GITLAB_TOKEN"), false},
		{"secret:* SIGNING_KEY", SecretTarget("reveal", "SIGNING_KEY"), true},
		{"secret:reveal *", SecretTarget("reveal", "ANY"), true},
		{"tool:invoke signer", SecretTarget("reveal", "signer"), false},
	} {
		g, err := Parse(tc.grant)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Allows(tc.target); got != tc.want {
			t.Errorf("%s allows %+v = %v, want %v", tc.grant, tc.target, got, tc.want)
		}
	}
	for _, tc := range []struct {
		parent, child string
		want          bool
	}{
		{"secret:reveal *", "secret:reveal SIGNING_KEY", true},
		{"secret:reveal GH_*", "secret:reveal GH_TOKEN", true},
		{"secret:reveal GH_TOKEN", "secret:reveal GH_*", false},
		{"secret:* K", "secret:reveal K", true},
		{"secret:reveal K", "secret:* K", false},
		{"secret:use K", "secret:reveal K", false},
		{"secret:reveal K", "secret:use K", false},
	} {
		p, err := Parse(tc.parent)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Parse(tc.child)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Covers(c); got != tc.want {
			t.Errorf("%s covers %s = %v, want %v", tc.parent, tc.child, got, tc.want)
		}
	}
}

// TestSecretMarkerRendering: a secret reference reaches the renderer as the
// marker $secret:NAME, which a grant's argument can name exactly or by a
// glob.
func TestSecretMarkerRendering(t *testing.T) {
	args, err := Render([]byte(`{"token":"$secret:GH_TOKEN"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := Rendering(args); r != "--token=$secret:GH_TOKEN" {
		t.Errorf("rendered %q", r)
	}
	for _, tc := range []struct {
		grant string
		want  bool
	}{
		{"tool:invoke t --token=$secret:GH_TOKEN", true},
		{"tool:invoke t --token=$secret:GH_*", true},
		{"tool:invoke t --token=$secret:OTHER", false},
		{"tool:invoke t --token=ghp_literal", false},
	} {
		g, err := Parse(tc.grant)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Allows(ToolTarget("t", args)); got != tc.want {
			t.Errorf("%s allows the marker = %v, want %v", tc.grant, got, tc.want)
		}
	}
}
