package maiden

import (
	"context"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/store"
)

// SyncState writes cfg's agents and, for each, exactly the system cards its
// grants declare to st: what a Host does the first time it authorizes a call
// under cfg. maiden's own command line calls it before an operator's card or
// token command, so that the store it changes is the one the next call
// reads. st is an internal/store.Store: only packages of this module can
// name one.
func SyncState(ctx context.Context, st store.Store, cfg *config.Config) error {
	return syncAgents(ctx, st, cfg)
}
