package egress

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/credential"
)

// failAfterUpdate is a shared token store whose leases in fail run the
// update and then fail (an UPDATE or COMMIT that failed after the token
// endpoint answered): the row stays as it was.
type failAfterUpdate struct {
	m    *memTokens
	mu   sync.Mutex
	n    int
	fail map[int]bool // which leases (1, 2, ...) fail
}

func (s *failAfterUpdate) LeaseToken(ctx context.Context, key string, update func([]byte) ([]byte, error)) error {
	s.mu.Lock()
	s.n++
	fail := s.fail[s.n]
	s.mu.Unlock()
	if !fail {
		return s.m.LeaseToken(ctx, key, update)
	}
	s.m.mu.Lock()
	stored := s.m.rows[key]
	s.m.mu.Unlock()
	if _, err := update(stored); err != nil {
		return err
	}
	return errors.New("commit failed")
}

// TestSharedStoreFailingAfterRotationKeepsIt (found by the twenty-eighth
// pass): when the shared token store fails after the endpoint answered,
// the refresh token the endpoint rotated to is not lost: the call gets its
// access token, and the next token request sends the rotated refresh
// token, not the one the store still holds, which the endpoint has spent
// (an endpoint that detects reuse would revoke the lineage). The lease
// after that stores the entry, and a new instance reading the row goes on
// from it.
func TestSharedStoreFailingAfterRotationKeepsIt(t *testing.T) {
	t.Run("same table", func(t *testing.T) { sharedStoreFailingAfterRotation(t, false) })
	// A change of scopes starts a new cache of the same lineage, which
	// carries the unsaved refresh token over.
	t.Run("scopes changed", func(t *testing.T) { sharedStoreFailingAfterRotation(t, true) })
}

func sharedStoreFailingAfterRotation(t *testing.T, rescope bool) {
	w := newTokWorld(t)
	w.tokens(3600, func(n int) string { return fmt.Sprintf("rt-28-%d", n) })
	w.e.secrets["API_TOKEN"] = "rt-28-0"
	spec := w.spec("/token")
	spec.Grant = credential.GrantRefreshToken
	w.setSpec(t, spec)
	store := &failAfterUpdate{m: &memTokens{rows: map[string][]byte{}}, fail: map[int]bool{2: true}}
	w.e.gate = w.instance(store)
	renew := func() { w.clock.Add(int64(time.Hour)) } // past the token's renewal instant

	// Lease 1 stores at-27-1 and rt-28-1.
	if resp, ferr := w.fetch(t); ferr != nil || resp.Status != 200 || w.lastAuth() != "Bearer at-27-1" {
		t.Fatalf("first call: %v %v, the API got %q", resp, ferr, w.lastAuth())
	}
	// Lease 2: the endpoint spends rt-28-1 and rotates to rt-28-2; the
	// store fails to keep them. The call still gets the new token.
	renew()
	if resp, ferr := w.fetch(t); ferr != nil || resp.Status != 200 || w.lastAuth() != "Bearer at-27-2" {
		t.Fatalf("the call whose token the store failed to keep: %v %v, the API got %q; want 200 with \"Bearer at-27-2\"", resp, ferr, w.lastAuth())
	}
	if got := w.form(1).Get("refresh_token"); got != "rt-28-1" {
		t.Fatalf("token request 2 sent refresh token %q; want rt-28-1", got)
	}
	// Lease 3: the store's row still holds rt-28-1, spent; rt-28-2 is the
	// one to send.
	renew()
	if rescope {
		spec.Scopes = []string{"read"}
		w.setSpec(t, spec)
	}
	if resp, ferr := w.fetch(t); ferr != nil || resp.Status != 200 || w.lastAuth() != "Bearer at-27-3" {
		t.Fatalf("the call after: %v %v, the API got %q", resp, ferr, w.lastAuth())
	}
	if got := w.form(2).Get("refresh_token"); got != "rt-28-2" {
		t.Fatalf("after the store failed to keep a rotation, token request 3 sent refresh token %q (the store's, spent); want rt-28-2", got)
	}
	// Lease 3 stored its entry: another instance reading the row sends
	// rt-28-3 when it renews.
	other := w.instance(store.m)
	w.e.gate = other
	if resp, ferr := w.fetch(t); ferr != nil || resp.Status != 200 || w.lastAuth() != "Bearer at-27-3" || w.requests() != 3 {
		t.Fatalf("a new instance: %v %v, the API got %q after %d token requests; want the stored \"Bearer at-27-3\", 3 requests", resp, ferr, w.lastAuth(), w.requests())
	}
	renew()
	if _, ferr := w.fetch(t); ferr != nil {
		t.Fatal(ferr)
	}
	if got := w.form(3).Get("refresh_token"); got != "rt-28-3" {
		t.Fatalf("the new instance's token request sent refresh token %q; want rt-28-3", got)
	}
}
