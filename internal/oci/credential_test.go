package oci

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// TestSecretKeychainOnlyForItsRegistry: the secret's login is given to
// its registry only (docker.io as go-containerregistry names it); any
// other registry is anonymous; a malformed or unset value is refused
// without printing it.
func TestSecretKeychainOnlyForItsRegistry(t *testing.T) {
	kc, err := SecretKeychain("127.0.0.1:5000", "REG", "robot:pa55word")
	if err != nil {
		t.Fatal(err)
	}
	auth := func(reg string) *authn.AuthConfig {
		t.Helper()
		r, err := name.NewRegistry(reg, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		a, err := kc.Resolve(r)
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := auth("127.0.0.1:5000"); c.Username != "robot" || c.Password != "pa55word" {
		t.Fatalf("its registry: %+v", c)
	}
	for _, other := range []string{"127.0.0.1:5001", "evil.example.com", "127.0.0.1"} {
		if c := auth(other); *c != (authn.AuthConfig{}) {
			t.Fatalf("registry %s got %+v, want anonymous", other, c)
		}
	}
	tok, err := SecretKeychain("docker.io", "HUB", "opaque-token")
	if err != nil {
		t.Fatal(err)
	}
	kc = tok
	if c := auth("index.docker.io"); c.RegistryToken != "opaque-token" {
		t.Fatalf("docker.io's token: %+v", c)
	}
	for _, bad := range []string{"", ":pw", "user:"} {
		_, err := SecretKeychain("127.0.0.1:5000", "REG", bad)
		if !errors.Is(err, ErrCredential) || (bad != "" && strings.Contains(err.Error(), bad)) {
			t.Fatalf("value %q: %v", bad, err)
		}
	}
}
