package mcpimport

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestCredentialOnlyToItsOrigin (eighth mutation pass): the client that
// carries an upstream's requests attaches the credential to requests to
// the URL's origin only; a request it is made to carry elsewhere (another
// port of the same host) goes without it. With redirects off the SDK never
// asks for one; this is the second lock, tested on its own.
func TestCredentialOnlyToItsOrigin(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	serve := func(name string) *httptest.Server {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name] = r.Header.Get("Authorization")
			mu.Unlock()
		}))
		t.Cleanup(ts.Close)
		return ts
	}
	own, other := serve("own"), serve("other")
	const value = "Bearer origin-bound-cred-51c"
	c, err := newHTTPClient(Options{Name: "up", URL: own.URL + "/mcp",
		Credential: func(context.Context) (string, error) { return value, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{own.URL + "/mcp", other.URL + "/mcp"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["own"] != value {
		t.Errorf("the upstream's own origin got Authorization %q; want the credential", seen["own"])
	}
	if seen["other"] != "" {
		t.Errorf("another origin (%s) got the upstream's credential: Authorization %q; want none", other.URL, seen["other"])
	}
}
