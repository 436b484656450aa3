package oci

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// ErrCredential is a registry credential that is missing or malformed.
var ErrCredential = errors.New("registry credential")

// SecretKeychain is the keychain of a credential a maiden secret holds
// (MAIDEN_SECRET_NAME, named by registry_credential or -credential):
// value is USER:PASSWORD, or a registry token without a colon. It answers
// for registry (host[:port]) only; every other registry (a blob redirect
// to another host, a mirror) is anonymous, so the credential is never sent
// where it was not meant for. go-containerregistry exchanges it at the
// registry's token service as the registry's challenge asks.
func SecretKeychain(registry, secret, value string) (authn.Keychain, error) {
	if value == "" {
		return nil, fmt.Errorf("%w %s: MAIDEN_SECRET_%s is not set", ErrCredential, secret, secret)
	}
	cfg := authn.AuthConfig{RegistryToken: value}
	if user, pass, ok := strings.Cut(value, ":"); ok {
		if user == "" || pass == "" {
			return nil, fmt.Errorf("%w %s: want USER:PASSWORD or a registry token (the value is not printed)", ErrCredential, secret)
		}
		cfg = authn.AuthConfig{Username: user, Password: pass}
	}
	// As go-containerregistry names it (docker.io is index.docker.io).
	reg, err := name.NewRegistry(registry, name.Insecure)
	if err != nil {
		return nil, fmt.Errorf("%w %s: registry %q: %v", ErrCredential, secret, registry, err)
	}
	return secretKeychain{registry: reg.RegistryStr(), auth: authn.FromConfig(cfg)}, nil
}

type secretKeychain struct {
	registry string
	auth     authn.Authenticator
}

func (k secretKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if r.RegistryStr() == k.registry {
		return k.auth, nil
	}
	return authn.Anonymous, nil
}
