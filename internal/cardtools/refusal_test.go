package cardtools

import (
	"errors"
	"fmt"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// TestRefusalSortsEveryCardError: each refusal the card rules give (a
// revoked or expired card, one not the caller's, a bound too broad, a
// system card, an empty card, a recipient the card is not for) reaches
// the agent as denied, each unknown name or malformed input as an input
// error, both wrapped as the store wraps them, with the operation named;
// anything else is the store's failure, not a refusal (pass 35's open
// plant: the revoked card's sentinel dropped from the list).
func TestRefusalSortsEveryCardError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		kind api.ErrorKind
	}{
		{store.ErrNotAllowed, api.KindDenied},
		{cards.ErrLowerBoundTooBroad, api.KindDenied},
		{cards.ErrUpperBoundTooBroad, api.KindDenied},
		{cards.ErrCardExpired, api.KindDenied},
		{cards.ErrCardRevoked, api.KindDenied},
		{cards.ErrInstallRecipientMismatch, api.KindDenied},
		{cards.ErrSystemCard, api.KindDenied},
		{cards.ErrEmptyCard, api.KindDenied},
		{cards.ErrBudgetTooBroad, api.KindDenied},
		{store.ErrUnknownCard, api.KindInput},
		{store.ErrUnknownAgent, api.KindInput},
		{store.ErrBadInput, api.KindInput},
		{grant.ErrSyntax, api.KindInput},
		{cards.ErrBadBudget, api.KindInput},
	} {
		err := fmt.Errorf("%w: card c-1", tc.err)
		r, serr := refusal("revoking card c-1", err)
		if serr != nil || r == nil || r.Kind != tc.kind || r.Message != "revoking card c-1: "+err.Error() {
			t.Errorf("refusal(%v) = %+v, %v; want kind %s, the operation named, no store error", err, r, serr, tc.kind)
		}
	}
	other := errors.New("database is locked")
	if r, err := refusal("revoking card c-1", other); r != nil || err == nil {
		t.Errorf("refusal(%v) = %+v, %v; want the store's error, no refusal", other, r, err)
	}
}
