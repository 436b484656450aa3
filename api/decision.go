package api

// Decision is the answer to one authorization question (may this agent
// invoke this tool with these arguments, connect to this host and port,
// use or reveal this secret, read or write this path): what the call path
// decides, what the audit trail records, what an operator is shown and
// what a what-if replay compares. It is the one Decision of maiden; an
// operator's answer to an approval is an Answer, not a Decision.
//
// Every field is plain text so that a reader needs no other package:
// Grant and Target are in the grant language of docs/cards.md, so either
// can be pasted into `maiden cards grant`.
type Decision struct {
	// Allow is true when the question is allowed.
	Allow bool `json:"allow"`
	// Reason is the whole denial in words an operator can act on ("" when
	// allowed).
	Reason string `json:"reason,omitempty"`
	// Rule names what decided in one line: "card ID: BOUND GRANT" when a
	// card did, "no card" when no card allows the target, the agent.toml
	// key when the tool's binding refused, "implicit agent" when the agent
	// of a configuration without [agents] (which holds every card) asked.
	Rule string `json:"rule,omitempty"`
	// Card is the ID of the card that decided ("" when none did).
	Card string `json:"card,omitempty"`
	// Bound is the list of that card that decided: DecisionLowerPositive,
	// DecisionLowerNegative, DecisionUpperPositive or DecisionUpperNegative.
	Bound string `json:"bound,omitempty"`
	// Grant is the grant that decided ("" for a ceiling that does not
	// cover the target, and when no card decided).
	Grant string `json:"grant,omitempty"`
	// Target is the canonical form of what was asked, as the grant that
	// allows exactly it ("tool:invoke weather --city=Berlin"); "" when
	// what was asked could not be made a target (a host that is not one).
	Target string `json:"target,omitempty"`
	// Fix is the command that would change the answer, when one would:
	// "maiden cards grant -agent NAME GRANT" for a target no card allows,
	// "maiden cards revoke ID" for a wallet-wide bound ("" when allowed).
	Fix string `json:"fix,omitempty"`
	// Wallet is the revision of the agent's pinned wallet that decided
	// (16 hex digits, a hash of its live cards' IDs; "" when no wallet
	// did): a replay of the decision (maiden audit whatif) is exact only
	// on a wallet of the same revision, and says so.
	Wallet string `json:"wallet,omitempty"`
	// Component is the digest of the component a tool call runs, as the
	// question carried it ("sha256:HEX": an oci:// tool's pinned manifest
	// digest, a local WebAssembly file's SHA-256; "" when not known or
	// not a call): what a grant naming a digest was compared with, and
	// what a replay asks again.
	Component string `json:"component,omitempty"`
}

// The lists of a card a Decision.Bound names (docs/cards.md).
const (
	DecisionLowerPositive = "lower-positive" // a grant that allows the target
	DecisionLowerNegative = "lower-negative" // an exception in the only cards that allowed it
	DecisionUpperPositive = "upper-positive" // a ceiling over the wallet that does not cover it
	DecisionUpperNegative = "upper-negative" // a prohibition over the wallet
)
