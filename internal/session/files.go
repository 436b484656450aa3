package session

import (
	"errors"

	"github.com/maiden-run/maiden/internal/boundary"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
)

// The file built-ins and the agent's fs cards. CARDS.md: "Resource grants
// are separate from tool grants: permission to call files read
// /reports/q3.csv does not grant the filesystem read that the tool then
// performs." So a call of fs_read, fs_write or fs_list needs, besides its
// tool:invoke card and the session's boundary, a card allowing fs:read
// (fs_read, fs_list) or fs:write (fs_write) of its path: asked twice, of
// the path as the call names it (FileDecision, before the call runs, in
// the call's audit record) and of where the path led as the tool opens it
// (FileAllow: a symlink beneath the boundary's directory can lead to
// another path in it).

// FileDecision is the wallet's decision on the path a call of the file
// built-in tool with input in names, resolved in boundary b as the tool
// resolves it (a relative path beneath the workspace), and that path; ok
// false when there is nothing to decide (another tool, or an input or
// path the tool refuses itself, touching nothing). A nil wallet is a
// refusal (decide's: only a declared agent has built-ins).
func FileDecision(tool string, b boundary.Boundary, in string, w *cards.Wallet) (d cards.Decision, p string, ok bool) {
	p, a, ok := hostfs.Target(tool, b, []byte(in))
	if !ok {
		return cards.Decision{}, "", false
	}
	return decide.Decide(decide.Basis{Wallet: w}, decide.Access(fileVerb(a), p)), p, true
}

// FileAllow is the wallet's fs cards as the file built-ins ask them
// (internal/builtin's Allow), about where a path led: a refusal's text is
// the decision's reason, naming the path and the grant missing.
func FileAllow(w *cards.Wallet) hostfs.Allow {
	return func(p string, a boundary.Access) error {
		d := decide.Decide(decide.Basis{Wallet: w}, decide.Access(fileVerb(a), p))
		if d.Allow {
			return nil
		}
		return errors.New(d.Reason)
	}
}

// fileVerb is the fs verb of a boundary access.
func fileVerb(a boundary.Access) string {
	if a == boundary.Write {
		return "write"
	}
	return "read"
}
