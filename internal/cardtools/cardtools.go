// Package cardtools is the card built-ins (cards_list, cards_derive,
// cards_transfer, cards_revoke) as tools: what tools/list shows of them
// (schemas, hints), who sees one (MayUse: a card:VERB grant on a card the
// agent holds), their input read strictly, and a refusal sorted into the
// kind the caller sees. The card rules themselves (attenuation, which cards
// an agent may see and act on, to whom it may hand one) are the operators'
// package's, admin, acting as the agent (admin.State.As): the CLI, the
// inbox and the built-ins run the same code on the same store. This
// package cannot import admin (nothing under internal/ does), so an
// operation is given it as Cards, which *admin.AgentState satisfies.
//
// The root's built-in backend (builtins.go) decides who sees a tool
// (MayUse), runs it through the call pipeline, and calls Run with admin
// acting as the calling agent:
//
//	out, refusal, err := cardtools.Tools["cards_list"].Run(ctx, adminlink.As(st, cfg, w).(*admin.AgentState), []byte(`{}`))
//
// A refusal is the caller's (a card rule, malformed input); an error is
// the store's.
package cardtools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
)

// Tool is one card built-in: the card:VERB grant it needs on a card the
// agent holds, what tools/list shows of it, and its operation.
type Tool struct {
	Verb        string
	Description string
	Input       string // JSON Schema
	Output      string // JSON Schema
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	// Run performs the operation on input (read strictly: unknown fields
	// are refused). The output is marshalled to JSON by the caller.
	Run func(ctx context.Context, c Cards, input []byte) (any, *Refusal, error)
}

// Cards is what an operation acts with: the operators' card operations
// acting as the calling agent (an *admin.AgentState from admin.State.As), which
// hold the card rules.
type Cards interface {
	Cards(ctx context.Context, agent string) ([]api.Card, error)
	Derive(ctx context.Context, parentID, to string, grants []string, expires time.Time, budget string) (api.Card, error)
	Transfer(ctx context.Context, id, to string) error
	Revoke(ctx context.Context, id string) (int, error)
}

// Refusal is an operation refused for the caller's reason: kind denied (a
// card rule, a card out of reach) or input (malformed input, an unknown
// name).
type Refusal struct {
	Kind    api.ErrorKind
	Message string
}

// Tools are the card built-ins by name.
var Tools = map[string]Tool{
	"cards_list": {
		Verb:        "inspect",
		Description: "List the permission cards in your own wallet (revoked ones included) that a card:inspect grant lets you see: each card's ID, grants, expiry and lineage.",
		Input:       `{"type":"object","properties":{},"additionalProperties":false}`,
		Output:      `{"type":"object","properties":{"cards":{"type":"array","items":{"type":"object"}}},"required":["cards"]}`,
		ReadOnly:    true, Idempotent: true,
		Run: list,
	},
	"cards_derive": {
		Verb: "derive",
		Description: "Derive a narrower card from a card you hold and put it in another agent's wallet (attenuation only: every grant must be under the parent card's, and the parent's exceptions, ceiling and expiry are kept). " +
			"Grants are strings like \"tool:invoke weather --city=Paris\". Needs card:derive on the parent card and card:install for the receiving agent's wallet.",
		Input: `{"type":"object","properties":{` +
			`"card":{"type":"string","description":"the ID of the parent card, which you hold"},` +
			`"to":{"type":"string","description":"the agent that receives the new card"},` +
			`"grants":{"type":"array","items":{"type":"string"},"minItems":1,"description":"what the new card allows, each as class:verb resource, e.g. tool:invoke weather --city=Paris"},` +
			`"expires_in":{"type":"string","description":"how long the new card lasts, a duration such as 30m or 1h (default: as long as the parent)"},` +
			`"budget":{"type":"string","description":"how much the new card may be used, e.g. calls=10,wall_ms=60000 (keys calls, wall_ms, bytes_out, cost; at most what the parent has left; default: what the parent has left)"}},` +
			`"required":["card","to","grants"],"additionalProperties":false}`,
		Output: `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`,
		Run:    derive,
	},
	"cards_transfer": {
		Verb:        "transfer",
		Description: "Move a card you hold to another agent's wallet (system cards stay put). Needs card:transfer on the card and card:install for the receiving agent's wallet.",
		Input: `{"type":"object","properties":{` +
			`"card":{"type":"string","description":"the ID of the card, which you hold"},` +
			`"to":{"type":"string","description":"the agent that receives it"}},"required":["card","to"],"additionalProperties":false}`,
		Output:      `{"type":"object","properties":{"card":{"type":"string"},"to":{"type":"string"}},"required":["card","to"]}`,
		Destructive: true,
		Run:         transfer,
	},
	"cards_revoke": {
		Verb:        "revoke",
		Description: "Revoke a card you hold or derived (directly or not), and with it every card derived from it; returns how many cards were revoked.",
		Input: `{"type":"object","properties":{` +
			`"card":{"type":"string","description":"the ID of the card to revoke"}},"required":["card"],"additionalProperties":false}`,
		Output:      `{"type":"object","properties":{"revoked":{"type":"integer"}},"required":["revoked"]}`,
		Destructive: true, Idempotent: true,
		Run: revoke,
	},
}

// MayUse reports whether the wallet allows card:verb on some card it holds:
// whether the agent sees the tool of that verb.
func MayUse(w *cards.Wallet, verb string) bool {
	for _, c := range w.Cards() {
		if decide.Decide(decide.Basis{Wallet: w}, decide.Operate(verb, c.ID)).Allow {
			return true
		}
	}
	return false
}

// DecodeInput reads a built-in's input strictly: unknown fields are an
// error, as its schema says.
func DecodeInput(tool string, input []byte, v any) *Refusal {
	d := json.NewDecoder(bytes.NewReader(input))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return &Refusal{Kind: api.KindInput, Message: fmt.Sprintf("%s: the input does not fit its schema: %v", tool, err)}
	}
	return nil
}

// refusal sorts an error of a card operation: a refusal by the card rules
// or an unknown name is the caller's, anything else is the store's.
// (admin's errors are these values: admin.ErrNotAllowed is
// store.ErrNotAllowed, and so on.)
func refusal(op string, err error) (*Refusal, error) {
	for _, e := range []error{store.ErrNotAllowed, cards.ErrLowerBoundTooBroad, cards.ErrUpperBoundTooBroad, cards.ErrCardExpired,
		cards.ErrCardRevoked, cards.ErrInstallRecipientMismatch, cards.ErrSystemCard, cards.ErrEmptyCard, cards.ErrBudgetTooBroad} {
		if errors.Is(err, e) {
			return &Refusal{Kind: api.KindDenied, Message: op + ": " + err.Error()}, nil
		}
	}
	for _, e := range []error{store.ErrUnknownCard, store.ErrUnknownAgent, store.ErrBadInput, grant.ErrSyntax, cards.ErrBadBudget} {
		if errors.Is(err, e) {
			return &Refusal{Kind: api.KindInput, Message: op + ": " + err.Error()}, nil
		}
	}
	return nil, fmt.Errorf("%s: %v", op, err)
}

func list(ctx context.Context, c Cards, input []byte) (any, *Refusal, error) {
	var in struct{}
	if r := DecodeInput("cards_list", input, &in); r != nil {
		return nil, r, nil
	}
	out, err := c.Cards(ctx, "")
	if err != nil {
		r, err := refusal("listing cards", err)
		return nil, r, err
	}
	return map[string]any{"cards": out}, nil, nil
}

func derive(ctx context.Context, c Cards, input []byte) (any, *Refusal, error) {
	var in struct {
		Card      string   `json:"card"`
		To        string   `json:"to"`
		Grants    []string `json:"grants"`
		ExpiresIn string   `json:"expires_in"`
		Budget    string   `json:"budget"`
	}
	if r := DecodeInput("cards_derive", input, &in); r != nil {
		return nil, r, nil
	}
	if len(in.Grants) == 0 {
		return nil, &Refusal{Kind: api.KindInput, Message: "cards_derive: grants is empty; name at least one grant, e.g. \"tool:invoke weather --city=Paris\""}, nil
	}
	// The grammar is checked here for the input's own words (which
	// grants[i]); admin parses them again, as it does the CLI's.
	for i, s := range in.Grants {
		if _, err := grant.Parse(s); err != nil {
			return nil, &Refusal{Kind: api.KindInput, Message: fmt.Sprintf("cards_derive: grants[%d]: %v", i, err)}, nil
		}
	}
	var expires time.Time
	if in.ExpiresIn != "" {
		d, err := time.ParseDuration(in.ExpiresIn)
		if err != nil || d <= 0 {
			return nil, &Refusal{Kind: api.KindInput, Message: fmt.Sprintf("cards_derive: expires_in %q: want a positive duration such as 30m or 1h", in.ExpiresIn)}, nil
		}
		expires = time.Now().Add(d)
	}
	if in.Budget != "" {
		if _, err := cards.ParseBudget(in.Budget); err != nil {
			return nil, &Refusal{Kind: api.KindInput, Message: "cards_derive: budget: " + err.Error()}, nil
		}
	}
	card, err := c.Derive(ctx, in.Card, in.To, in.Grants, expires, in.Budget)
	if err != nil {
		r, err := refusal(fmt.Sprintf("deriving from card %s for agent %q", in.Card, in.To), err)
		return nil, r, err
	}
	return map[string]any{"id": card.ID}, nil, nil
}

func transfer(ctx context.Context, c Cards, input []byte) (any, *Refusal, error) {
	var in struct {
		Card string `json:"card"`
		To   string `json:"to"`
	}
	if r := DecodeInput("cards_transfer", input, &in); r != nil {
		return nil, r, nil
	}
	if err := c.Transfer(ctx, in.Card, in.To); err != nil {
		r, err := refusal(fmt.Sprintf("transferring card %s to agent %q", in.Card, in.To), err)
		return nil, r, err
	}
	return map[string]any{"card": in.Card, "to": in.To}, nil, nil
}

func revoke(ctx context.Context, c Cards, input []byte) (any, *Refusal, error) {
	var in struct {
		Card string `json:"card"`
	}
	if r := DecodeInput("cards_revoke", input, &in); r != nil {
		return nil, r, nil
	}
	if strings.TrimSpace(in.Card) == "" {
		return nil, &Refusal{Kind: api.KindInput, Message: "cards_revoke: card is empty; name the ID of the card to revoke"}, nil
	}
	n, err := c.Revoke(ctx, in.Card)
	if err != nil {
		r, err := refusal(fmt.Sprintf("revoking card %s", in.Card), err)
		return nil, r, err
	}
	return map[string]any{"revoked": n}, nil, nil
}
