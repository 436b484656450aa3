package egress

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/credential"
	"github.com/maiden-run/maiden/internal/pgtest"
	"github.com/maiden-run/maiden/internal/store"
)

func TestMain(m *testing.M) {
	connectTCP = loopbackOnly(connectTCP)
	code := pgtest.Run(m)
	if n := offLoopback.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the gate tried to connect off loopback %d times (refused by the test's guard)\n", n)
		code = 1
	}
	os.Exit(code)
}

// instances are n gates of one world, each with its own store handle on
// one PostgreSQL database (each its own connection pool, as separate
// maiden processes have), sharing tokens through it.
func (w *oauthWorld) instances(t *testing.T, url string, n int) []*Gate {
	var gs []*Gate
	for range n {
		db, err := store.Open(context.Background(), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		gs = append(gs, New(&Options{Resolver: w.e.res, Audit: w.e.audit.logger(), Tokens: db,
			LookupSecret: func(n string) (string, bool) { v, ok := w.e.secrets[n]; return v, ok },
			Now:          func() time.Time { return time.Now().Add(time.Duration(w.clock.Load())) }}))
	}
	return gs
}

// allCall makes one call through each gate at once.
func (w *oauthWorld) allCall(t *testing.T, gs []*Gate) {
	t.Helper()
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Go(func() {
			resp, ferr := g.Fetch(ctxTimeout(t, 20*time.Second), w.p, withCred(get(urlFor(w.api, "api.example.com", "/v1/x")), "API_TOKEN"))
			if ferr != nil || resp.Status != 200 {
				t.Errorf("instance %d: %v %v", i, resp, ferr)
			}
		})
	}
	wg.Wait()
}

// TestOAuth2SharedAcrossInstances: three instances on one PostgreSQL store
// sharing a refresh-token credential make one token request for their
// first calls and one when the token nears its expiry, though the
// endpoint rotates the refresh token each time (so the instances that did
// not refresh must use the rotation another stored); an instance started
// later uses the stored token, and one started after it expired refreshes
// with the stored refresh token; the database holds no token, refresh token
// or client secret in any readable form.
func TestOAuth2SharedAcrossInstances(t *testing.T) {
	w := newRefreshWorld(t)
	url := pgtest.URL(t)
	gs := w.instances(t, url, 3)
	w.allCall(t, gs)
	if n := w.as.requests.Load(); n != 1 {
		t.Fatalf("3 instances' first calls made %d token requests, want 1", n)
	}
	w.clock.Store(int64(4*time.Minute + 45*time.Second))
	w.allCall(t, gs)
	if n := w.as.requests.Load(); n != 2 {
		t.Fatalf("3 instances near expiry made %d token requests in all, want 2", n)
	}
	later := w.instances(t, url, 1)
	w.allCall(t, later)
	if n := w.as.requests.Load(); n != 2 {
		t.Fatalf("an instance started later made a token request (%d in all)", n)
	}
	// An instance started after the token expired refreshes with the
	// refresh token the store holds: the configured one was rotated away.
	w.clock.Store(int64(9*time.Minute + 45*time.Second))
	w.allCall(t, w.instances(t, url, 1))
	if n := w.as.requests.Load(); n != 3 {
		t.Fatalf("a new instance after expiry: %d token requests in all, want 3", n)
	}

	rows := pgtest.Exec(t, url, "SELECT key || ' ' || sealed FROM credential_tokens")
	if strings.Count(rows, "oauth2:") != 1 {
		t.Fatalf("rows: %q", rows)
	}
	sealed := strings.Fields(rows)[1]
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil {
		t.Fatal(err)
	}
	secrets := append(w.as.accessTokens(), w.as.refreshTokens()...)
	secrets = append(secrets, "websecret", "API_TOKEN")
	assertNoKeyMaterial(t, "the database row", rows+string(raw), secrets...)

	// The row opens only with the credential's values: with another
	// refresh token (a rotated secret) it is nothing.
	k := newTokenKey("API_TOKEN", w.refreshSpec("web", true), valuesOf(w))
	a, _ := shareAEAD(shareRow(k), valuesOf(w))
	if e, ok := openEntry(a, shareRow(k), raw); !ok || e.Token == "" {
		t.Fatal("the row does not open with the credential's values")
	}
	other := valuesOf(w)
	other.Value += "x"
	b, _ := shareAEAD(shareRow(k), other)
	if _, ok := openEntry(b, shareRow(k), raw); ok {
		t.Fatal("the row opens with another secret")
	}
}

func valuesOf(w *oauthWorld) credential.Values {
	return credential.Values{Value: w.e.secrets["API_TOKEN"], ClientSecret: w.e.secrets["API_TOKEN"+credential.ClientSecretPart]}
}
