package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/store"
)

// principalCheck asks, while a call waits for a human (an approval, a
// boundary request: at every poll) and after, whether whoever made the
// call may still make it: a front end authenticated the call's credential
// when the request came in, and the wait may last minutes, long enough for
// an operator to revoke the token (maiden agents revoke-token) or a reload
// to remove the agent from agent.toml. Neither may let the call run, nor
// send its result to a client that lost its authority: a human's approval
// is an answer about the call, not a renewal of the caller's credential.
// Nor may the call keep waiting: it would hold its place among its agent's
// waiting calls, and a goroutine, until a human answered or the wait timed
// out, only to be refused then.
//
// It holds what it needs of the Host: the configuration in force (the
// agent must still be declared there) and the state store's getter (the
// token must still be live there).
type principalCheck struct {
	cfg   *atomic.Pointer[config.Config]
	state func(ctx context.Context, cfg *config.Config) (store.Store, error)
}

// refusal returns why the call must not go on ("" when it may): the
// agent is no longer declared by the configuration in force, or the
// call's credential is an agent token ("token:" and its ID, TokenCredential)
// that the state store no longer holds live. A call with no credential (an
// embedder's), or another front end's ("stdio"), is checked for its agent
// only. A store that cannot answer is ErrState: nothing runs on a question
// of authority left unanswered.
func (p principalCheck) refusal(ctx context.Context, inv *invocation) (string, error) {
	if p.cfg == nil {
		return "", nil
	}
	cur := p.cfg.Load()
	if cur != nil && !declares(cur, inv.agent) {
		return fmt.Sprintf("agent removed: agent %q was removed from %s while this call waited for a human (the configuration was reloaded without it), so nothing was run, whatever a human answers", inv.agent, cur.File()), nil
	}
	id, state, err := p.token(ctx, inv)
	switch {
	case err != nil:
		return "", err
	case state == tokenRevoked:
		return fmt.Sprintf("token revoked: the agent token this call was made with (ID %s) was revoked while the call waited for a human, so nothing was run, whatever a human answers; a client holding a valid token may repeat the call", id), nil
	case state == tokenUnknown:
		return fmt.Sprintf("token unknown: the agent token this call was made with (ID %s) is not one of agent %q's tokens in the state store, so the call stopped waiting for a human and nothing was run", id, inv.agent), nil
	}
	return "", nil
}

// What the state store says of a call's agent token (principalCheck.token).
const (
	tokenLive    = ""        // live, or the call has no agent token
	tokenRevoked = "revoked" // revoked
	tokenUnknown = "unknown" // not one of the agent's tokens
)

// token looks up the call's agent token ("token:" and its ID,
// TokenCredential) among its agent's tokens in the state store: its ID
// and whether it is live, revoked or unknown; tokenLive for a call with
// no agent token. An error is the store getter's as it is, or ErrState
// for a store that could not read the tokens.
func (p principalCheck) token(ctx context.Context, inv *invocation) (id, state string, err error) {
	id, ok := strings.CutPrefix(inv.call.Credential, "token:")
	if !ok {
		return "", tokenLive, nil
	}
	st, err := p.state(ctx, inv.cfg)
	if err != nil {
		return id, "", err
	}
	toks, err := st.Tokens(ctx, inv.agent)
	if err != nil {
		return id, "", fmt.Errorf("%w: checking the call's token: %v", ErrState, err)
	}
	for _, t := range toks {
		if t.ID != id || t.Agent != inv.agent {
			continue
		}
		if !t.Revoked.IsZero() {
			return id, tokenRevoked, nil
		}
		return id, tokenLive, nil
	}
	return id, tokenUnknown, nil
}

// declares reports whether cfg has agent: one of its [agents], or, with
// none declared, the implicit DefaultAgent.
func declares(cfg *config.Config, agent string) bool {
	if cfg.Implicit() {
		return agent == DefaultAgent
	}
	_, ok, _ := cfg.AgentBinding(agent, "")
	return ok
}
