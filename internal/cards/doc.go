// Package cards is the permission-card model of CARDS.md (Golem's model,
// distilled): cards with four grant lists (lower/upper, positive/negative),
// an expiry, parent links and a system flag; the decision over a wallet
// pinned at one instant; derivation as attenuation only; the revocation
// cascade; the install rule. It is pure: the store (internal/store) keeps
// cards durable and calls CheckDerive, CheckInstall and Cascade inside its
// transactions, and the call path pins a Wallet and asks internal/decide,
// whose one function every question of authority goes through and which
// calls Decide here.
//
//	w := cards.NewWallet("research", time.Now(), cardsFromTheStore)
//	d := w.Decide(grant.ToolTarget("weather", args))
//	if !d.Allow {
//		return denied(d.Reason) // no card of agent "research" allows tool:invoke weather --city=Berlin (grant it: ...)
//	}
//
// Design notes:
//   - Deny by default: an empty wallet, an expired or revoked card, a grant
//     for another recipient allow nothing. The zero grant.Grant allows
//     nothing.
//   - Decide checks the wallet-wide bounds (every card's ceiling and
//     upper-negative grants) before looking for an allowing card, because
//     a denial by a bound cannot be fixed by granting more: its reason names
//     the card to revoke instead, while "no card allows" names the exact
//     grant to paste (grant.Target.String, shell-quoted).
//   - A wallet indexes its lower-positive grants by literal name (a tool,
//     secret or card ID), so a decision looks at the grants that can match
//     rather than at every card; grants with a wildcard name are scanned.
//     An allowed decision allocates nothing (BenchmarkDecide).
//   - CheckDerive is sound by construction on grant.Covers, and checks the
//     ceiling per possible holder because a grant for one recipient caps
//     no other (FuzzAttenuation found that case). Child fills a derived
//     card's negatives, ceiling and expiry from the parent; an explicit
//     later expiry is refused (card-expired), never silently clamped.
//   - A wallet is an immutable value built per call from the store's answer;
//     NextExpiry tells a caller that caches one (keyed by the store's change
//     counter) when it must pin a new one.
package cards
