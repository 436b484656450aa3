package admin

import (
	"testing"

	"github.com/maiden-run/maiden/internal/secret"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/whatif"
)

// TestWhatIfKinds: the replay reads the records the call path writes, by
// their kinds; internal/whatif, which imports no store, spells them itself.
func TestWhatIfKinds(t *testing.T) {
	for _, k := range []struct{ replay, written string }{
		{whatif.KindCallAdmitted, store.AuditCallAdmitted},
		{whatif.KindCallRefused, store.AuditCallRefused},
		{whatif.KindFetch, store.AuditFetch},
		{whatif.KindReveal, secret.AuditReveal},
	} {
		if k.replay != k.written {
			t.Errorf("internal/whatif reads %q records, the call path writes %q", k.replay, k.written)
		}
	}
}
