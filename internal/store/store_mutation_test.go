package store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The store's authority decisions, written when planted bugs in them left
// the package's own suite green (docs/security-tests.md, "The session
// gate and the state store's authority under mutation"). SQLite only: the
// decisions are the same code on both backends.

// TestRevokedTokenRefusedFromTheCache: a revoked token is refused every
// time, also once its row (revoked) is in the token cache: the first
// Authenticate after the revocation reads the row and caches it, the
// second answers from the cache.
func TestRevokedTokenRefusedFromTheCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	mustAgents(t, s, "research")
	tok, info, err := s.MintToken(ctx, "research")
	if err != nil {
		t.Fatal(err)
	}
	if a, err := s.Authenticate(ctx, tok); err != nil || a != "research" {
		t.Fatalf("Authenticate = %q, %v", a, err)
	}
	if err := s.RevokeToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if a, err := s.Authenticate(ctx, tok); !errors.Is(err, ErrBadToken) || a != "" {
			t.Errorf("Authenticate of the revoked token, time %d: %q, %v; want ErrBadToken", i+1, a, err)
		}
	}
}

// TestFindApprovedNotAfterExpiry: an approval whose time is up is not
// found for the call it was approved for (expiry is a denial), though not
// yet marked expired.
func TestFindApprovedNotAfterExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClock()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), c)
	a := newApproval(t, s, "d1", time.Hour)
	if _, err := s.Decide(ctx, a.ID, true, "cli:root", "ok"); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.FindApproved(ctx, "a", "pay", "d1", c.now()); err != nil || !found {
		t.Fatalf("FindApproved before the expiry: found %v, %v", found, err)
	}
	if got, found, err := s.FindApproved(ctx, "a", "pay", "d1", c.now().Add(time.Hour+time.Second)); err != nil || found {
		t.Errorf("FindApproved after the expiry: %+v found %v, %v; want none", got, found, err)
	}
}

// TestOpenSessionWithinZeroIsTheDefault: a bound of 0 is
// DefaultMaxSessions, not no bound: the session after them is refused.
func TestOpenSessionWithinZeroIsTheDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	for i := range DefaultMaxSessions {
		if _, _, err := s.OpenSessionWithin(ctx, "", "coder", "", workBoundary(), 0); err != nil {
			t.Fatalf("session %d of the default bound: %v", i+1, err)
		}
	}
	_, _, err := s.OpenSessionWithin(ctx, "", "coder", "", workBoundary(), 0)
	if !errors.Is(err, ErrTooManySessions) || !strings.Contains(err.Error(), "holds 1000 live sessions") {
		t.Errorf("session %d with bound 0: %v; want ErrTooManySessions at %d", DefaultMaxSessions+1, err, DefaultMaxSessions)
	}
}

// TestSessionsCountedForOneDay: a session opened or used within the last
// 24 hours counts against the agent's bound; one last used a minute more
// than 24 hours ago does not (docs: the 24 h window).
func TestSessionsCountedForOneDay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClock()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), c)
	if _, _, err := s.OpenSessionWithin(ctx, "", "coder", "", workBoundary(), 1); err != nil {
		t.Fatal(err)
	}
	c.add(23*time.Hour + 59*time.Minute)
	if _, _, err := s.OpenSessionWithin(ctx, "", "coder", "", workBoundary(), 1); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("23 h 59 min later: %v; want ErrTooManySessions", err)
	}
	c.add(2 * time.Minute)
	if _, _, err := s.OpenSessionWithin(ctx, "", "coder", "", workBoundary(), 1); err != nil {
		t.Errorf("24 h 1 min later: %v; want the old session no longer counted", err)
	}
}
