package session

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/store"
)

// TestProxyOnlyMaterial is BOUNDARIES.md B17 ("a login flow that needs only
// proxy authentication: only networkProxy material is resolved") as maiden
// implements it: a web_fetch binding whose only material is a proxy secret
// resolves nothing else (the host's secrets are not asked for any name),
// and, since maiden's gate never sends a request through a proxy
// (docs/builtins.md, "Proxy secret"), web_fetch refuses it with
// proxy_not_supported before anything is resolved or sent; a binding with
// a connection secret and a header asks for exactly those two.
func TestProxyOnlyMaterial(t *testing.T) {
	s := store.Session{ID: "s1", Agent: "a", Boundary: boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Network: true}}
	var asked []string
	lookup := func(name string) (string, bool) {
		asked = append(asked, name)
		return "v-" + name, true
	}
	var ms Materials
	m, terr := ms.Resolve(s, config.Binding{Tool: "web_fetch", ProxySecret: "PROXY_PASS"}, lookup)
	if terr != nil || len(asked) != 0 || m.Connection != nil || m.Headers != nil || m.Proxy == nil {
		t.Fatalf("proxy only: material %+v, refusal %+v, secrets asked %q; want only the proxy part, nothing asked", m, terr, asked)
	}
	fetched := false
	_, err := hostfs.WebFetch(context.Background(), s.Boundary, []byte(`{"url":"https://api.example.com/"}`),
		func(context.Context, egress.Request) (*egress.Response, *egress.FetchError) {
			fetched = true
			return nil, &egress.FetchError{}
		}, m)
	var ce *boundary.CommandError
	if !errors.As(err, &ce) || ce.Reason != hostfs.ReasonProxyNotSupported || fetched {
		t.Fatalf("web_fetch with proxy material: %v (fetched %v); want %s before any fetch", err, fetched, hostfs.ReasonProxyNotSupported)
	}

	ms.Drop("s1")
	asked = nil
	b := config.Binding{Tool: "web_fetch", Credential: "API_TOKEN", SecretHeaders: map[string]string{"X-Api-Key": "KEY_ONE"}}
	m, terr = ms.Resolve(s, b, lookup)
	if terr != nil || !slices.Equal(asked, []string{"API_TOKEN", "KEY_ONE"}) || m.Proxy != nil || m.Connection == nil || len(m.Headers) != 1 {
		t.Fatalf("connection and header: material %+v, refusal %+v, asked %q; want exactly API_TOKEN and KEY_ONE", m, terr, asked)
	}
}
