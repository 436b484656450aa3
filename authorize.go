package maiden

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
)

// This file is authority: after exposure (agents.go) has found the tool as
// the agent sees it, the agent's cards must allow the call itself, argument
// by argument (CARDS.md "Decision").

// authorize renders the call's input canonically and decides on the
// agent's wallet, pinned when the call reaches this stage. The implicit
// agent of a configuration without [agents] holds a card that allows
// everything, so it is not asked.
func (h *Host) authorize(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if inv.cfg.Implicit() {
			return next(ctx, inv)
		}
		args, err := grant.Render([]byte(inv.call.Input))
		if err != nil {
			return inv.fail(KindInput, "input cannot be rendered for authorization: "+err.Error())
		}
		inv.rendered = args
		w := h.wallet(inv.cfg, inv.agent, time.Now())
		if d := w.Decide(grant.ToolTarget(inv.tool.Name, args)); !d.Allow {
			return inv.fail(KindDenied, d.Reason)
		}
		return next(ctx, inv)
	}
}

// wallet is agent's wallet at time at: its system cards (the grants agent.toml
// gives it). Cards granted at run time join them when the state store lands.
func (h *Host) wallet(cfg *config.Config, agent string, at time.Time) *cards.Wallet {
	return cards.NewWallet(agent, at, h.systemCards(cfg)[agent])
}

// systemCardSet is the system cards of one configuration, built once.
type systemCardSet struct {
	cfg   *config.Config
	cards map[string][]cards.Card // by agent
}

// systemCards returns the system cards of cfg by agent: one card per
// entry of an agent's grants, with an ID derived from the agent and the
// grant so that it is the same on every load and every instance.
func (h *Host) systemCards(cfg *config.Config) map[string][]cards.Card {
	if s := h.sysCards.Load(); s != nil && s.cfg == cfg {
		return s.cards
	}
	h.sysCardsMu.Lock()
	defer h.sysCardsMu.Unlock()
	if s := h.sysCards.Load(); s != nil && s.cfg == cfg {
		return s.cards
	}
	s := &systemCardSet{cfg: cfg, cards: map[string][]cards.Card{}}
	for _, a := range cfg.Agents() {
		for _, g := range a.Grants {
			s.cards[a.Name] = append(s.cards[a.Name], cards.Card{
				ID:      systemCardID(a.Name, g.Grant.String()),
				Holder:  a.Name,
				Spec:    cards.Spec{LowerPos: cards.Any(g.Grant)},
				System:  true,
				Manager: "system",
			})
		}
	}
	h.sysCards.Store(s)
	return s.cards
}

// systemCardID names a system card by what it is, so the same grant of the
// same agent has the same ID across restarts.
func systemCardID(agent, grantText string) string {
	sum := sha256.Sum256([]byte(agent + "\x00" + grantText))
	return "sys-" + hex.EncodeToString(sum[:6])
}

// sysCardsState is embedded in Host.
type sysCardsState struct {
	sysCards   atomic.Pointer[systemCardSet]
	sysCardsMu sync.Mutex
}
