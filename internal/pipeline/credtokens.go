package pipeline

import (
	"context"
	"sync/atomic"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/store"
)

// tokenShare is the gate's egress.TokenStore: the host's state store, once
// it is open, when it is one several instances share (PostgreSQL); they
// then make one OAuth 2.0 token request per credential between them. A
// SQLite store, or none, shares nothing and the gate keeps its tokens.
// It holds what it needs of the Host (the configuration in force,
// Options.StatePath, the store getter), not the Host: the gate it is given
// to is every backend's.
type tokenShare struct {
	cfg       *atomic.Pointer[config.Config]
	statePath string
	state     func(ctx context.Context, cfg *config.Config) (store.Store, error)
}

// tokenShare is the Host's token store for its gate (New).
func (h *Host) tokenShare() tokenShare {
	return tokenShare{cfg: &h.cfg, statePath: h.opts.StatePath, state: h.stateHolder.get}
}

// leaser is what a store that shares credential tokens has
// (internal/store's DB).
type leaser interface {
	SharesTokens() bool
	LeaseToken(ctx context.Context, key string, update func(stored []byte) ([]byte, error)) error
}

func (t tokenShare) LeaseToken(ctx context.Context, key string, update func([]byte) ([]byte, error)) error {
	cfg := t.cfg.Load()
	if cfg == nil {
		return egress.ErrNotShared
	}
	path := t.statePath
	if path == "" {
		path = cfg.StatePath()
	}
	if !store.IsPostgres(path) {
		// Not a store instances share: do not open (or create) one for
		// this, a host whose calls never needed it would now need it.
		return egress.ErrNotShared
	}
	st, err := t.state(ctx, cfg)
	if err != nil {
		return err
	}
	l, ok := st.(leaser)
	if !ok || !l.SharesTokens() {
		return egress.ErrNotShared
	}
	return l.LeaseToken(ctx, key, update)
}
