package oci

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/net/publicsuffix"

	"github.com/maiden-run/maiden/internal/egress"
)

var (
	// ErrCredential is a registry credential that is missing or malformed.
	ErrCredential = errors.New("registry credential")
	// ErrLoginHost means a registry asked maiden to send the login of a
	// maiden secret (USER:PASSWORD) to a token service outside the
	// registry's own domain; it is refused before any connection is made
	// there (see loginHost).
	ErrLoginHost = errors.New("registry login refused")
)

// RuleLoginHost: a maiden secret's login goes to the registry itself or
// a token service of the registry's own registrable domain only.
const RuleLoginHost = "oci-login-host"

// SecretKeychain is the keychain of a credential a maiden secret holds
// (MAIDEN_SECRET_NAME, named by registry_credential or -credential):
// value is USER:PASSWORD, or a registry token without a colon. It answers
// for registry (host[:port]) only; every other registry (a blob redirect
// to another host, a mirror) is anonymous, so the credential is never sent
// where it was not meant for. go-containerregistry exchanges it at the
// token service the registry's challenge names (its realm); maiden lets
// the login go there only when that host is of the registry's own domain
// (loginHost).
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
	values := map[string]string{secret: value}
	if cfg.Password != "" {
		values[secret+" password"] = cfg.Password // echoed apart from the user (a decoded Basic)
	}
	return secretKeychain{registry: reg.RegistryStr(), auth: authn.FromConfig(cfg), login: cfg.Username != "",
		redact: egress.ValueRedactor(values)}, nil
}

type secretKeychain struct {
	registry string
	auth     authn.Authenticator
	// login: the secret is USER:PASSWORD, which go-containerregistry
	// sends as Basic to a token service (a registry token is sent as
	// Bearer to the registry only, never exchanged).
	login bool
	// redact hides the secret's value (and its password, and their
	// encodings: a Basic header's base64) in a registry's error answers
	// (capTransport), which go-containerregistry quotes in its errors.
	redact func(string) string
}

func (k secretKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if r.RegistryStr() == k.registry {
		return k.auth, nil
	}
	return authn.Anonymous, nil
}

// checkLogin refuses req when it carries a Basic login to a host that is
// not allowed it (loginHost). It sees every request go-containerregistry
// sends, so it holds whatever the registry's challenge said and however
// go-containerregistry parsed it: the check is on what would be sent.
func (t capTransport) checkLogin(req *http.Request) error {
	if !t.login {
		return nil
	}
	scheme, _, _ := strings.Cut(req.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "basic") || loginHost(t.registry, req.URL) {
		return nil
	}
	return fmt.Errorf("%w (rule: %s): the registry %s asked for its login (a maiden secret) to be sent to %s, which is not of the registry's own domain; the login goes to the registry and to a token service of its domain only",
		ErrLoginHost, RuleLoginHost, t.registry, req.URL.Host)
}

// loginHost reports whether a registry's login may be sent to u: the
// registry's own origin, or a host of the registry's registrable domain
// (the public suffix list's eTLD+1: auth.docker.io for Docker Hub's
// index.docker.io, gitlab.com for registry.gitlab.com, ghcr.io for
// itself). Whoever holds that domain already controls the registry's
// name, so trusting its hosts with the login trusts no one new; a
// registry cannot name a host of anyone else's domain (attacker.example,
// another site under a suffix the list names as shared, such as
// bar.github.io for foo.github.io, an IP address) as its token service
// and collect the login there.
func loginHost(registry string, u *url.URL) bool {
	host, reg := hostOnly(u.Host), hostOnly(registry)
	if host == reg && portOf(u.Host, u.Scheme) == portOf(registry, u.Scheme) {
		return true
	}
	// An address has no domain, and its other ports may be anyone's (on
	// loopback, another user's listener).
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	if _, err := netip.ParseAddr(reg); err == nil {
		return false
	}
	d1, err1 := publicsuffix.EffectiveTLDPlusOne(host)
	d2, err2 := publicsuffix.EffectiveTLDPlusOne(reg)
	return err1 == nil && err2 == nil && d1 == d2
}
