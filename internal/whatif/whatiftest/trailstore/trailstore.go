// Package trailstore writes internal/whatif's varied test trail
// (whatiftest's) into a real state store. It is apart from whatiftest
// because the store starts goroutines (its journal's ingester), and
// internal/whatif's tests, which use whatiftest, run without the race
// detector on the ground that nothing they import starts one
// (internal/testkit's TestNoRacePackagesStartNoGoroutine).
package trailstore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/whatif/whatiftest"
)

// StoreInfo is what Store wrote.
type StoreInfo struct {
	// Cards counts the cards installed (Revoked of them revoked since,
	// Derived of them derived from another), Records the records
	// appended to the trail.
	Cards, Revoked, Derived, Records int
	// Live is the live card that decided the most records, for a
	// change to revoke.
	Live string
}

// Store writes a random trail of n records (RandomTrail's, on nCards of
// RandomCards' cards) into the state store at path through the store's
// own API, as maiden writes them: the agents (EnsureAgent), the cards
// (Grant, Derive where a card's parent allows it, Revoke), and the records
// through the audit journal (Journal.Append, then Flush), timed now. A
// card RandomCards makes expired is not installed, and one that
// CheckInstall refuses (its grants are all for other agents) neither: the
// trail is decided on the cards the store then holds, pinned now.
func Store(ctx context.Context, path string, seed uint64, nCards, n int) (StoreInfo, error) {
	var info StoreInfo
	st, err := store.Open(ctx, path, nil)
	if err != nil {
		return info, err
	}
	defer st.Close()
	for _, a := range whatiftest.Agents {
		if err := st.EnsureAgent(ctx, a); err != nil {
			return info, err
		}
	}
	now := time.Now()
	rng := rand.New(rand.NewPCG(seed, 2))
	ids := map[string]string{} // RandomCards' ID → the store's
	for _, c := range whatiftest.RandomCards(nil, rng, nCards, now) {
		if !c.Expires.IsZero() && !c.Expires.After(now) {
			continue
		}
		var made cards.Card
		err := fmt.Errorf("no parent")
		if len(c.Parents) == 1 && ids[c.Parents[0]] != "" {
			made, err = st.Derive(ctx, store.Operator(), ids[c.Parents[0]], c.Holder, c.Spec)
			if err == nil {
				info.Derived++
			}
		}
		if err != nil {
			made, err = st.Grant(ctx, c.Holder, c.Spec)
		}
		if err != nil {
			continue // CheckInstall refused it (or its derivation and grant)
		}
		ids[c.ID] = made.ID
		info.Cards++
		if !c.Revoked.IsZero() {
			if _, err := st.Revoke(ctx, store.Operator(), made.ID); err != nil {
				return info, err
			}
			info.Revoked++
		}
	}
	cs, err := st.Cards(ctx, "")
	if err != nil {
		return info, err
	}
	tr := whatiftest.RandomTrail(nil, rng, cs, now, n)
	// The live card that decided the most records: revoking it flips
	// some.
	most := 0
	for _, c := range cs {
		if !c.Live(now) {
			continue
		}
		k, needle := 0, []byte(`"card":"`+c.ID+`"`)
		for _, r := range tr.Recs {
			k += bytes.Count(r.Body, needle)
		}
		if k > most {
			info.Live, most = c.ID, k
		}
	}
	j := st.Journal()
	for _, r := range tr.Recs {
		if err := j.Append(store.AuditRecord{At: r.At, Kind: r.Kind, Actor: r.Actor, Agent: r.Agent, Tool: r.Tool, Body: r.Body}); err != nil {
			return info, err
		}
	}
	if err := j.Flush(ctx); err != nil {
		return info, err
	}
	info.Records = len(tr.Recs)
	return info, nil
}
