package oci

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/maiden-run/maiden/internal/testkit"
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

// TestLoginOnlyToRegistryDomain: a registry's Bearer challenge names its
// token service (realm), and go-containerregistry sends the login there as
// Basic. A registry naming a host of another domain (here evil.test) would
// collect a maiden secret's USER:PASSWORD there; it is refused before any
// connection to that host, naming the rule. A token service of the
// registry's own domain gets the login, and an anonymous pull follows a
// challenge to any (https, address-checked) host as before.
func TestLoginOnlyToRegistryDomain(t *testing.T) {
	t.Parallel()
	srv, h, tr := tlsRegistry(t, "registry.test", "auth.registry.test", "evil.test")
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	host := "registry.test:" + port
	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	hosts := testkit.Hosts{"registry.test": loop, "auth.registry.test": loop, "evil.test": loop}

	type seen struct{ host, auth string }
	var mu sync.Mutex
	var tokenReqs []seen
	h.override("/token", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokenReqs = append(tokenReqs, seen{hostOnly(r.Host), r.Header.Get("Authorization")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"token":"registry-bearer"}`))
	})
	login, err := SecretKeychain(host, "REG", "ann:hunter2")
	if err != nil {
		t.Fatal(err)
	}
	anonymous, err := SecretKeychain("elsewhere.test", "REG", "ann:hunter2")
	if err != nil {
		t.Fatal(err)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ann:hunter2"))
	for _, tt := range []struct {
		name  string
		realm string
		kc    authn.Keychain
		want  error    // nil: the pull succeeds
		says  []string // in the refusal
		auth  string   // what the token service got: Authorization ("-": no request)
	}{
		{name: "login to another domain", realm: "evil.test", kc: login, want: ErrLoginHost, auth: "-",
			says: []string{"rule: " + RuleLoginHost, "registry " + host, "sent to evil.test:" + port}},
		{name: "login to the registry domain", realm: "auth.registry.test", kc: login, auth: basic},
		{name: "anonymous to another domain", realm: "evil.test", kc: anonymous, auth: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dl := &dialLog{t: t}
			opts := &PullOptions{Transport: tr, Resolver: hosts, Keychain: tt.kc, dial: dl.dial}
			repo := "login/" + strings.ReplaceAll(tt.name, " ", "-")
			pinned := pushWith(t, "oci://"+host+"/"+repo+":v1", echo(t), opts)
			pinned.Tag = ""
			// From now on the registry asks for a token from the realm.
			h.override("/v2/", func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") == "Bearer registry-bearer" {
					return
				}
				w.Header().Set("WWW-Authenticate", `Bearer realm="https://`+tt.realm+":"+port+`/token",service="registry.test"`)
				w.WriteHeader(http.StatusUnauthorized)
			})
			defer h.override("/v2/", nil)
			mu.Lock()
			tokenReqs = nil
			mu.Unlock()
			_, err := Pull(context.Background(), pinned, newStore(t), opts)
			if tt.want == nil && err != nil {
				t.Fatalf("Pull: %v", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Pull = %v; want %v", err, tt.want)
			}
			if tt.want != nil && err != nil {
				for _, s := range tt.says {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), basic[6:]) {
					t.Errorf("the refusal holds the login: %v", err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if tt.auth == "-" {
				if len(tokenReqs) != 0 {
					t.Fatalf("the token service got %+v; want no request", tokenReqs)
				}
				return
			}
			if len(tokenReqs) == 0 || tokenReqs[0] != (seen{tt.realm, tt.auth}) {
				t.Fatalf("the token service got %+v; want %s with Authorization %q", tokenReqs, tt.realm, tt.auth)
			}
		})
	}
}

// TestLoginHost: the hosts a registry's login may go to, for registries
// as they name their token services (Docker Hub's auth.docker.io,
// GitLab's gitlab.com, ghcr.io itself) and for hosts of anyone else.
func TestLoginHost(t *testing.T) {
	for _, tt := range []struct {
		registry, realm string
		want            bool
	}{
		{"index.docker.io", "https://auth.docker.io/token", true},
		{"ghcr.io", "https://ghcr.io/token", true},
		{"registry.gitlab.com", "https://gitlab.com/jwt/auth", true},
		{"registry.example.com:5000", "https://registry.example.com:5000/auth", true},
		{"registry.example.com:5000", "https://auth.example.com/token", true},
		{"127.0.0.1:5000", "http://127.0.0.1:5000/token", true},
		{"index.docker.io", "https://auth.docker.io.evil.test/token", false},
		{"index.docker.io", "https://docker.io.evil.test/token", false},
		{"ghcr.io", "https://evil.test/token", false},
		{"foo.github.io", "https://bar.github.io/token", false}, // a public suffix: other owners
		{"registry.example.com", "https://93.184.215.14/token", false},
		{"127.0.0.1:5000", "http://127.0.0.1:5001/token", false}, // another listener
		{"localhost:5000", "http://localhost:5001/token", false},
		{"nvcr.io", "https://authn.nvidia.com/token", false}, // another domain: docker's keychain, not a secret
	} {
		u, err := url.Parse(tt.realm)
		if err != nil {
			t.Fatal(err)
		}
		if got := loginHost(tt.registry, u); got != tt.want {
			t.Errorf("loginHost(%s, %s) = %v; want %v", tt.registry, tt.realm, got, tt.want)
		}
	}
}

// TestRegistryErrorEchoRedacted: go-containerregistry quotes a registry's
// error answer in its error (its JSON errors' messages, or the raw body),
// which maiden pull, add and publish print. A registry or token service
// that answers a login with an error echoing the Authorization header it
// got (the Basic login, the registry token) put the credential, in the
// clear or as its base64, on the operator's terminal and in the log of a
// CI job that pulls. The error bodies of a registry reached with a
// maiden secret are redacted of it before go-containerregistry reads them,
// by Pull and by Push alike.
func TestRegistryErrorEchoRedacted(t *testing.T) {
	t.Parallel()
	srv, h, tr := tlsRegistry(t, "registry.test", "auth.registry.test")
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	host := "registry.test:" + port
	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	hosts := testkit.Hosts{"registry.test": loop, "auth.registry.test": loop}
	const login, token = "ann:hunter2-e1c9f0aa", "regtok-77b2c1d9e0f3a4b5"
	echoAuth := func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		_, b64, _ := strings.Cut(got, " ")
		dec, _ := base64.StdEncoding.DecodeString(b64)
		msg, _ := json.Marshal("refused " + got + " (" + string(dec) + ")")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":` + string(msg) + `}]}`))
	}
	for _, tt := range []struct {
		name, value string
		leaks       []string
	}{
		{"login refused by the token service", login, []string{"hunter2-e1c9f0aa", base64.StdEncoding.EncodeToString([]byte(login))}},
		{"registry token refused by the registry", token, []string{token}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kc, err := SecretKeychain(host, "REG", tt.value)
			if err != nil {
				t.Fatal(err)
			}
			h.override("/token", echoAuth)
			defer h.override("/token", nil)
			digest := "sha256:" + strings.Repeat("0", 64)
			challenge := func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer "+token) {
					echoAuth(w, r)
					return
				}
				w.Header().Set("WWW-Authenticate", `Bearer realm="https://auth.registry.test:`+port+`/token",service="registry.test"`)
				w.WriteHeader(http.StatusUnauthorized)
			}
			manifest := "/v2/echo/login/manifests/" + digest
			// Push's: the upload's start (its look for the tag, a HEAD
			// whose answer has no body to echo, finds nothing).
			uploads, tagged := "/v2/echo/login/blobs/uploads/", "/v2/echo/login/manifests/v1"
			for _, p := range []string{"/v2/", manifest, uploads} {
				h.override(p, challenge)
				defer h.override(p, nil)
			}
			h.override(tagged, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodHead {
					http.NotFound(w, r)
					return
				}
				challenge(w, r)
			})
			defer h.override(tagged, nil)
			dl := &dialLog{t: t}
			opts := &PullOptions{Transport: tr, Resolver: hosts, Keychain: kc, dial: dl.dial}
			r, err := ParseRef("oci://" + host + "/echo/login@" + digest)
			if err != nil {
				t.Fatal(err)
			}
			tag, err := ParseRef("oci://" + host + "/echo/login:v1")
			if err != nil {
				t.Fatal(err)
			}
			// maiden pull and add, then maiden publish: the same
			// transport, the same redaction.
			for _, op := range []struct {
				name string
				do   func() error
			}{
				{"Pull", func() error { _, err := Pull(context.Background(), r, newStore(t), opts); return err }},
				{"Push", func() error { _, err := Push(context.Background(), tag, echo(t), opts); return err }},
			} {
				err := op.do()
				if err == nil {
					t.Fatalf("%s succeeded against a registry refusing every login", op.name)
				}
				for _, leak := range tt.leaks {
					if strings.Contains(err.Error(), leak) {
						t.Errorf("the error %s gives holds the credential (%s): %v", op.name, leak, err)
					}
				}
				if !strings.Contains(err.Error(), "[REDACTED:REG]") {
					t.Errorf("the error %s gives %q, want the registry's words with the credential [REDACTED:REG]", op.name, err)
				}
			}
		})
	}
}
