package api

import "time"

// WhatIfReport is what a what-if replay found (maiden audit whatif): the
// recorded decisions of the audit trail in a window, each decided again on
// today's cards and on today's cards with a proposed change, and the ones
// whose outcome the change flips, grouped by agent and tool. Its JSON is
// what `maiden audit whatif -json` prints.
type WhatIfReport struct {
	// Since and Until bound the window of records replayed.
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Change is the proposed change, as given.
	Change WhatIfChange `json:"change"`
	// Replayed counts the recorded decisions of the agents' cards that
	// were decided again (a call's tool:invoke, an http-fetch's
	// network:connect and secret:use as one, a reveal's secret:reveal,
	// an approve layer's answer to approve:always recorded in its
	// verdict).
	Replayed int `json:"replayed"`
	// Verified counts those recorded on a wallet of today's revision,
	// whose replay on today's cards reproduced the recorded decision
	// exactly (the same outcome, card, bound and grant).
	Verified int `json:"verified"`
	// Inexact lists replays on a wallet of the recorded revision that did
	// not reproduce the recorded decision: the replay cannot be trusted
	// (never expected; the command exits 2 when there is any).
	Inexact []WhatIfExample `json:"inexact,omitempty"`
	// Stale counts decisions recorded on another revision of the agent's
	// wallet (cards granted, revoked or expired since), and ChangedSince
	// those of them whose outcome on today's cards already differs from
	// the recorded one, before any change: not flips of the change.
	Stale        int `json:"stale"`
	ChangedSince int `json:"changed_since"`
	// Unversioned counts decisions recorded before decisions named their
	// wallet's revision: replayed, but not checked against the record.
	Unversioned int `json:"unversioned"`
	// Partial counts the replayed records that cut a list of their
	// decisions (more rewrites or fs decisions than a record keeps): what
	// they hold is replayed, what they cut is not.
	Partial int `json:"partial,omitempty"`
	// Skipped counts records of calls whose cards were not asked (the
	// implicit agent, a card built-in, a refusal before authorization, a
	// reveal the binding refused) or that no replay can read.
	Skipped int `json:"skipped"`
	// Asked counts the approval requests replayed as the approve:always
	// question their approve layer asked (no card pre-approved the call,
	// so a human was asked): a grant of approve:always may flip them to
	// allowed. The request's record holds no decision; the layer's
	// answer, in the verdict of the call's record, is checked there (in
	// Replayed).
	Asked int `json:"asked"`
	// Standing counts the standing approvals replayed: an always-card
	// that let an admitted call skip an approve layer (its verdict names
	// the card), asked again on the card's binding; revoking the card
	// flips them to asking a human. The card's answer, in the same
	// verdict, is checked too (in Replayed).
	Standing int `json:"standing"`
	// Flips is the number of decisions whose outcome the change flips;
	// Groups has them by agent and tool.
	Flips  int           `json:"flips"`
	Groups []WhatIfGroup `json:"groups"`
}

// WhatIfChange is a proposed change of the cards: cards revoked (each with
// every card derived from it, as a revocation does) and grants added, each
// to its agent as one new card per agent and kind (As) of grant.
type WhatIfChange struct {
	Revoke []string      `json:"revoke,omitempty"`
	Grants []WhatIfGrant `json:"grants,omitempty"`
}

// WhatIfGrant is a grant given to an agent.
type WhatIfGrant struct {
	Agent string `json:"agent"`
	Grant string `json:"grant"`
	// Bound, when set, binds the new card to a tool's code and policy, as
	// the always-card an approval mints is (its approve layer counts it
	// only for calls of that same tool and policy); grants of one agent
	// with different Bound go to different cards.
	Bound string `json:"bound,omitempty"`
	// As is what the grant is on its card: "" allows it (lower-positive),
	// WhatIfDeny forbids it across the agent's wallet (upper-negative, as
	// cards grant -deny), WhatIfCeiling bounds the wallet by it
	// (upper-positive, as cards grant -ceiling). Grants of one agent with
	// different As go to different cards.
	As string `json:"as,omitempty"`
}

// The kinds of grant a WhatIfGrant may add besides an allowance.
const (
	WhatIfDeny    = "deny"
	WhatIfCeiling = "ceiling"
)

// WhatIfGroup is the flips of one agent's calls of one tool.
type WhatIfGroup struct {
	Agent string `json:"agent"`
	Tool  string `json:"tool"`
	// AllowedToDenied and DeniedToAllowed count the flips each way.
	AllowedToDenied int `json:"allowed_to_denied"`
	DeniedToAllowed int `json:"denied_to_allowed"`
	// Examples are the first flips of each way (at most three each), in
	// the trail's order.
	Examples []WhatIfExample `json:"examples"`
}

// WhatIfExample is one replayed decision.
type WhatIfExample struct {
	// Seq and At are the record's.
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
	// Agent and Tool are the record's; Record its kind (call-admitted,
	// call-refused, fetch, secret-reveal, approval).
	Agent  string `json:"agent"`
	Tool   string `json:"tool"`
	Record string `json:"record"`
	// Target is what was asked, in the grant language
	// ("tool:invoke pay --to=alice", "network:connect api.example.com:443").
	Target string `json:"target"`
	// Recorded is the decision as the record holds it, Before the replay
	// on today's cards, After the replay with the change.
	Recorded Decision `json:"recorded"`
	Before   Decision `json:"before"`
	After    Decision `json:"after"`
}

// NewlyPossible is what a grant, or a session's boundary expansion, would
// newly allow, shown before a human gives it (maiden cards grant, maiden
// pending ID and the inbox page on an approval that may mint an
// always-card or widen a boundary).
type NewlyPossible struct {
	// Since and Until bound the window of recorded calls looked at.
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Beyond says in words, one line per grant (or boundary entry), what
	// it allows beyond what the agent's wallet (or the session's
	// boundary) allows today: "tool:invoke pay with any --to= (today only
	// --to=alice)", "write under /srv/app/** (today read only)", or
	// "nothing new: ..." for a grant today covers.
	Beyond []string `json:"beyond"`
	// Redundant: nothing is new (every line says "nothing new").
	Redundant bool `json:"redundant"`
	// Calls counts the recorded decisions of the window that were refused
	// or asked a human and that the grant would have allowed (a call's
	// tool:invoke, an http-fetch, a reveal, an approval request; for a
	// boundary, the session's calls its boundary refused); Examples are
	// the first of them (at most MaxNewlyExamples), oldest first.
	Calls    int             `json:"calls"`
	Examples []WhatIfExample `json:"examples"`
	// NotReplayable counts the recorded calls of the window that could
	// not be replayed, and NotReplayableWhy says why (for a boundary: the
	// session's refused built-in calls whose records do not name the
	// revision of the boundary they ran under): neither counted in Calls
	// nor taken as refused.
	NotReplayable    int    `json:"not_replayable,omitempty"`
	NotReplayableWhy string `json:"not_replayable_why,omitempty"`
}

// RuleAsked is the Rule of the recorded decision of an approval request
// in a WhatIfExample: no card pre-approved the call, so a human was asked.
const RuleAsked = "asked"

// RuleApprovedAlways is the Rule of the recorded decision of a standing
// approval in a WhatIfExample: an always-card (Card) let the call skip a
// human.
const RuleApprovedAlways = "approved always"

// MaxNewlyExamples bounds NewlyPossible.Examples.
const MaxNewlyExamples = 10
