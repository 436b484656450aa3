package maiden

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// HandlePrefix starts every secret handle the host puts in a tool's input
// in place of {"$secret": "NAME"}. A handle is opaque: what follows the
// prefix means nothing to the tool, and the handle is valid only during
// the call whose input carried it.
const HandlePrefix = "maiden-secret-handle:"

// IsHandle tells whether s has the form of a secret handle. It does not
// tell whether the host will honour it (only handles of the current call
// are honoured).
func IsHandle(s string) bool { return strings.HasPrefix(s, HandlePrefix) }

// ErrNoReveal is the error of Reveal in a component that was not built
// against maiden:tool@0.3.0 (which has the host's reveal). maiden build
// selects 0.3.0 for a package main that calls Reveal; a tool that calls it
// only from another package must be built with -tags maiden_tool_0_3
// (GOFLAGS=-tags=maiden_tool_0_3).
var ErrNoReveal = errors.New("maiden: Reveal needs maiden:tool@0.3.0: maiden build selects it when package main calls maiden.Reveal; otherwise build with -tags maiden_tool_0_3")

// RevealError is the host's refusal of a Reveal: Message names what was
// missing (the binding's reveal list, a secret:reveal card, a handle of
// this call). The refusal is an audit record on the host.
type RevealError struct {
	Message string
}

func (e *RevealError) Error() string { return "maiden: reveal refused: " + e.Message }

// Reveal returns the value of the secret that handle (a string the host put
// in this call's input in place of {"$secret": "NAME"}) stands for.
//
// Prefer not to: pass the handle as Request.Credential instead, and the
// host attaches the secret to the request while the value never enters the
// tool. Reveal is for what http-fetch cannot do with a credential (signing
// a request body with the secret, say). The host returns the value only if
// the tool was built against maiden:tool@0.3.0 (see ErrNoReveal), the
// operator's binding allows revealing that secret (reveal in agent.toml),
// and the calling agent holds a card `secret:reveal NAME`; otherwise the
// error is a *RevealError naming what was missing. Every reveal, allowed or
// not, is an audit record on the host (never the value), and the value is
// still redacted from the call's output, errors and logs: echoing it
// achieves nothing.
func Reveal(handle string) (string, error) {
	if !utf8.ValidString(handle) {
		return "", fmt.Errorf("maiden: reveal: the handle is not valid UTF-8")
	}
	return hostReveal(handle)
}
