// Package decide is maiden's one authorization decision: every question
// of authority a call asks — may this agent invoke this tool with these
// arguments (or skip an approve layer), connect to this host and port,
// use or reveal this secret, read or write this path, derive, transfer,
// revoke or inspect this card — is answered by
// Decide, from the question and the basis it is decided on (the agent's
// pinned wallet, the tool's binding), and nothing else. It runs without a
// Host, a store or a network, so the same function answers a live call
// and a replay of a recorded one.
//
//	d := decide.Decide(decide.Basis{Wallet: w}, decide.Invoke(target))
//	if !d.Allow {
//		return denied(d.Reason) // no card of agent "research" allows tool:invoke weather --city=Berlin (grant it: ...)
//	}
//	record(d.API()) // the card, list and grant that decided, the target, the fix
//
// Design notes:
//   - The answer is a cards.Decision: allocation-free when allowed (the
//     call path decides once per call and again per http-fetch), rendered
//     as the shared api.Decision (text only) by API when it is shown or
//     recorded.
//   - Deny by default: a question of an unknown kind, one that cannot be
//     made a target (a host that is not one, a path that is not clean),
//     and a declared agent's question without its wallet are refused,
//     never guessed. Only the implicit agent (a configuration without
//     [agents]), which holds every card, is allowed without a wallet.
//   - The binding is asked before the cards where it narrows: a reveal
//     needs the secret in the binding's reveal and secrets (agent.toml) and
//     a secret:reveal card. Egress's own rules (http_allow, ports, secret
//     destinations) stay in internal/egress, which asks this package last,
//     so cards only ever narrow agent.toml.
//   - A tool call's question carries the digest of the component it runs
//     (grant.Target.Component: an oci:// tool's pinned manifest digest, a
//     local WebAssembly file's SHA-256), so a grant naming a digest is
//     decided here like any other part of the call, and a replay asks the
//     same question from the recorded decision (api.Decision.Component).
//   - Exposure (is the tool bound to the agent at all) is not a decision
//     of authority: an unbound tool does not exist for the agent
//     (CARDS.md A12), which the call path settles before it asks.
package decide

import (
	"fmt"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
)

// Kind is the kind of a question.
type Kind uint8

// Kinds of question.
const (
	// Tool: tool:invoke, the call as the call path rendered it.
	Tool Kind = iota + 1
	// Always: approve:always, the standing approval that lets a call skip
	// an approve layer.
	Always
	// Network: network:connect HOST:PORT, as the egress gate normalised it.
	Network
	// SecretUse: secret:use NAME, a credential an http-fetch attaches (or
	// a wrapped CLI's CONNECT, web_fetch's request, an import's calls).
	SecretUse
	// SecretReveal: secret:reveal NAME, a tool asking for a secret's value.
	SecretReveal
	// FS: fs:read or fs:write of a path.
	FS
	// CardOp: card:VERB of a card the agent holds (derive, revoke,
	// transfer, inspect, install), an agent acting on its own wallet.
	CardOp
	// Subtree: fs:read or fs:write of everything beneath a directory
	// (fs:VERB DIR/**), as a session preopen hands it over whole.
	Subtree
)

// Question is what is asked. Build it with Invoke, AlwaysApprove,
// Connect, Use, Reveal, Access, AccessTree or Operate.
type Question struct {
	Kind Kind
	// Target is the call (Tool, Always): grant.ToolTarget or
	// grant.CommandTarget over the call's canonical rendering, taken as
	// given, with Target.Component the digest of the component the call
	// runs when it is known (a grant naming a digest allows only a call
	// carrying that digest).
	Target grant.Target
	// Host and Port are a destination (Network).
	Host string
	Port int
	// Secret is a secret's name (SecretUse, SecretReveal).
	Secret string
	// Verb ("read" or "write") and Path, absolute and clean (FS).
	// Verb (a card verb) and Card, a card's ID (CardOp).
	// Verb ("read" or "write") and Path, a directory (Subtree).
	Verb, Path string
	Card       string
}

// Invoke asks whether the call t may run.
func Invoke(t grant.Target) Question { return Question{Kind: Tool, Target: t} }

// AlwaysApprove asks whether a standing approval covers the call t
// (grant.AlwaysTarget, grant.AlwaysCommandTarget).
func AlwaysApprove(t grant.Target) Question { return Question{Kind: Always, Target: t} }

// Connect asks whether the agent may connect to host:port.
func Connect(host string, port int) Question { return Question{Kind: Network, Host: host, Port: port} }

// Use asks whether the agent may use the secret name as a credential.
func Use(name string) Question { return Question{Kind: SecretUse, Secret: name} }

// Reveal asks whether the tool may learn the value of the secret name.
func Reveal(name string) Question { return Question{Kind: SecretReveal, Secret: name} }

// Access asks whether the agent may read or write (verb) path.
func Access(verb, path string) Question { return Question{Kind: FS, Verb: verb, Path: path} }

// AccessTree asks whether the agent may read or write (verb) everything
// beneath the directory dir, with no exception or prohibition that may
// reach inside it: the question of a directory handed over whole.
func AccessTree(verb, dir string) Question { return Question{Kind: Subtree, Verb: verb, Path: dir} }

// Operate asks whether the agent may do verb (derive, revoke, transfer,
// inspect, install) on the card id.
func Operate(verb, id string) Question { return Question{Kind: CardOp, Verb: verb, Card: id} }

// Basis is what a question is decided on besides itself.
type Basis struct {
	// Wallet is the agent's wallet, pinned when the call was authorized.
	Wallet *cards.Wallet
	// Implicit is set for the agent of a configuration without [agents],
	// which holds every card and so has no wallet.
	Implicit bool
	// Binding is the tool's policy as the agent's binding narrows it
	// (what a reveal needs).
	Binding Binding
}

// Binding is the part of a tool's effective policy that a decision reads.
type Binding struct {
	// Tool is the tool's name.
	Tool string
	// Secrets are the secrets the tool may use (tools.NAME.secrets).
	Secrets []string
	// Reveal are the secrets whose value it may learn (tools.NAME.reveal).
	Reveal []string
}

// Policies that decide instead of the cards (cards.Decision.Policy).
const (
	// PolicyImplicit: the agent of a configuration without [agents].
	PolicyImplicit = "implicit agent"
	// PolicyNoWallet: a declared agent's question without its wallet.
	PolicyNoWallet = "no wallet"
	// PolicyTarget: what was asked cannot be made a target.
	PolicyTarget = "not a target"
)

// Decide answers q on basis b (CARDS.md "Decision", and the binding
// before the cards where it narrows them).
func Decide(b Basis, q Question) cards.Decision {
	var t grant.Target
	switch q.Kind {
	case Tool, Always:
		t = q.Target
		want := grant.Tool
		if q.Kind == Always {
			want = grant.Approve
		}
		if t.Class != want {
			return refuse(t, PolicyTarget, fmt.Sprintf("the call cannot be checked against the agent's cards: a %s question with a %q target", q.Kind, t.Class))
		}
		if t.Component != "" && !grant.ValidComponent(t.Component) {
			// The call path hands over digests it computed or verified;
			// refuse rather than compare a malformed one.
			return refuse(t, PolicyTarget, fmt.Sprintf("the call cannot be checked against the agent's cards: its component digest %q is not sha256: and 64 lower-case hex digits", t.Component))
		}
	case Network:
		nt, err := grant.NetworkTarget(q.Host, q.Port)
		if err != nil {
			// The gate hands over only hosts it checked; refuse rather
			// than guess if the two ever disagree.
			return refuse(grant.Target{}, PolicyTarget, "the destination cannot be checked against the agent's cards: "+err.Error())
		}
		t = nt
	case SecretUse:
		t = grant.SecretTarget("use", q.Secret)
	case SecretReveal:
		t = grant.SecretTarget("reveal", q.Secret)
		bd := b.Binding
		if !slices.Contains(bd.Reveal, q.Secret) || !slices.Contains(bd.Secrets, q.Secret) {
			return refuse(t, "tools."+bd.Tool+".reveal",
				fmt.Sprintf("revealing %s is not allowed for tool %s: it is not in reveal (tools.%s.reveal in agent.toml, as the agent's binding narrows it)", q.Secret, bd.Tool, bd.Tool))
		}
	case FS:
		if q.Verb != "read" && q.Verb != "write" {
			return refuse(grant.Target{}, PolicyTarget, fmt.Sprintf("the path cannot be checked against the agent's cards: verb %q is not read or write", q.Verb))
		}
		ft, err := grant.FSTarget(q.Verb, q.Path)
		if err != nil {
			return refuse(grant.Target{}, PolicyTarget, "the path cannot be checked against the agent's cards: "+err.Error())
		}
		t = ft
	case Subtree:
		if q.Verb != "read" && q.Verb != "write" {
			return refuse(grant.Target{}, PolicyTarget, fmt.Sprintf("the directory cannot be checked against the agent's cards: verb %q is not read or write", q.Verb))
		}
		switch {
		case b.Wallet != nil:
			return subtree(b.Wallet, q.Verb, q.Path)
		case b.Implicit:
			return cards.Decision{Allow: true, Policy: PolicyImplicit, Target: "fs:" + q.Verb + " " + strings.TrimSuffix(q.Path, "/") + "/**"}
		}
		return refuse(grant.Target{}, PolicyNoWallet, "the agent's cards are not known to this call")
	case CardOp:
		switch q.Verb {
		case "derive", "revoke", "transfer", "inspect", "install":
		default:
			return refuse(grant.Target{}, PolicyTarget, fmt.Sprintf("the card operation cannot be checked against the agent's cards: verb %q is not a card verb", q.Verb))
		}
		t = grant.CardTarget(q.Verb, q.Card)
	default:
		return refuse(grant.Target{}, PolicyTarget, fmt.Sprintf("unknown question (kind %d)", q.Kind))
	}
	switch {
	case b.Wallet != nil:
		return b.Wallet.Decide(t)
	case b.Implicit:
		return cards.Decision{Allow: true, Policy: PolicyImplicit, Asked: t}
	}
	// A declared agent's call always has its pinned wallet; refuse
	// rather than guess if it ever does not.
	return refuse(t, PolicyNoWallet, "the agent's cards are not known to this call")
}

// refuse is a denial by policy rather than by a card.
func refuse(t grant.Target, policy, reason string) cards.Decision {
	d := cards.Decision{Policy: policy, Reason: reason, Asked: t}
	if t.Class != "" {
		d.Target = t.String()
	}
	return d
}

// String names the kind as the grant language does.
func (k Kind) String() string {
	switch k {
	case Tool:
		return "tool:invoke"
	case Always:
		return "approve:always"
	case Network:
		return "network:connect"
	case SecretUse:
		return "secret:use"
	case SecretReveal:
		return "secret:reveal"
	case FS:
		return "fs"
	case CardOp:
		return "card"
	case Subtree:
		return "fs subtree"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}
