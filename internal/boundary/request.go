package boundary

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Outcome reasons of BOUNDARIES.md, and maiden's own (marked).
const (
	ReasonExplicitDeny        = "explicit_deny"
	ReasonAlreadyApplied      = "already_applied"
	ReasonBoundaryKindChanged = "boundary_kind_changed"
	ReasonHostRestarted       = "host_restarted"
	ReasonTurnStopped         = "turn_stopped"

	ReasonApplied              = "applied"               // maiden: approved with a new revision
	ReasonDenied               = "denied"                // maiden: a denial without the operator's words
	ReasonInvalidID            = "invalid_id"            // maiden: a request ID outside ^[A-Za-z0-9_-]{1,128}$
	ReasonInvalidJustification = "invalid_justification" // maiden: empty after trimming, or over 2000 characters
	ReasonBoundaryNotManaged   = "boundary_not_managed"  // maiden: a request against a bypass or external boundary
)

// Status of a request.
type Status string

const (
	Pending  Status = "pending"
	Approved Status = "approved"
	Denied   Status = "denied"
	Conflict Status = "conflict"
)

// Assessment is what applying an expansion to a boundary would do.
type Assessment struct {
	Status   Status   // Approved or Conflict
	Reason   string   // explicit_deny, already_applied, applied, payload_too_large, boundary_kind_changed, or a validation reason
	Boundary Boundary // the boundary after: the same one unless Reason is applied (then revision + 1)
}

// Assess an expansion against a boundary's current profile (BOUNDARIES.md, Assessment): a conflict with an
// explicit deny or a protected name first, then a no-op when everything is covered, else the new revision: the old
// profile plus the entries, compacted, network enabled if asked. A new boundary whose canonical JSON would pass
// MaxBoundarySize is a conflict with payload_too_large. The expansion is validated again, so a hand-built value
// gets no further than a request would.
func Assess(b Boundary, x Expansion) Assessment {
	same := Assessment{Status: Conflict, Boundary: b}
	if b.Kind != Managed {
		same.Reason = ReasonBoundaryKindChanged
		return same
	}
	raw, err := json.Marshal(x)
	if err == nil {
		x, err = Validate(raw)
	}
	if err != nil {
		same.Reason = ReasonInvalidExpansion
		if ve, ok := err.(*ValidationError); ok {
			same.Reason = ve.Reason
		}
		return same
	}
	for _, e := range x.Entries {
		if conflicts(b, e) {
			same.Reason = ReasonExplicitDeny
			return same
		}
	}
	covered := !x.Network || b.Network
	for _, e := range x.Entries {
		covered = covered && profileCovers(b, e)
	}
	if covered {
		return Assessment{Status: Approved, Reason: ReasonAlreadyApplied, Boundary: b}
	}
	next := b
	next.Entries = compact(append(append([]Entry{}, b.Entries...), x.Entries...))
	next.Network = b.Network || x.Network
	next.Revision = b.Revision + 1
	if out, err := next.Canonical(); err != nil || len(out) > MaxBoundarySize {
		same.Reason = ReasonPayloadTooLarge
		return same
	}
	return Assessment{Status: Approved, Reason: ReasonApplied, Boundary: next.Normalize()}
}

// Request is a boundary-expansion request: a value the caller persists; Create and Settle are its only transitions.
type Request struct {
	ID            string    `json:"id"`
	Status        Status    `json:"status"`
	BaseRevision  int64     `json:"baseRevision"` // the revision it was made against
	BaseKind      Kind      `json:"baseKind"`
	Expansion     Expansion `json:"expansion"` // validated and compacted
	Justification string    `json:"justification"`
	Reason        string    `json:"reason,omitempty"`   // the outcome's reason once settled
	Revision      int64     `json:"revision,omitempty"` // once approved: the revision that holds the expansion
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Create makes a pending request against the session's current boundary. prior is the stored request with the
// same ID, if the caller found one: then the same ID is the same request, and prior comes back unchanged with
// created false, whatever else was passed (its own expansion and status are the answer). A refusal is a
// *ValidationError whose Reason is one of BOUNDARIES.md's validation reasons, or invalid_id, invalid_justification
// or boundary_not_managed.
func Create(prior *Request, id string, current Boundary, expansion []byte, justification string) (r Request, created bool, err error) {
	if !idPattern.MatchString(id) {
		return Request{}, false, &ValidationError{Reason: ReasonInvalidID, Detail: "id: want ^[A-Za-z0-9_-]{1,128}$"}
	}
	if prior != nil && prior.ID == id {
		return *prior, false, nil
	}
	if current.Kind != Managed {
		return Request{}, false, &ValidationError{Reason: ReasonBoundaryNotManaged, Detail: "the session's boundary is " + quote(string(current.Kind))}
	}
	x, err := Validate(expansion)
	if err != nil {
		return Request{}, false, err
	}
	j := strings.TrimSpace(justification)
	if n := utf8.RuneCountInString(j); n < 1 || n > MaxJustification {
		return Request{}, false, &ValidationError{Reason: ReasonInvalidJustification, Detail: "justification: want 1 to 2000 characters after trimming, got " + itoa(n)}
	}
	return Request{ID: id, Status: Pending, BaseRevision: current.Revision, BaseKind: current.Kind, Expansion: x, Justification: j}, true, nil
}

// Answer is a human's (or the host's) answer to a request.
type Answer struct {
	Allow  bool
	Reason string // for a denial: the operator's text, turn_stopped, host_restarted; trimmed, at most 2000 characters
}

// Allow approves; Deny refuses with a reason.
func Allow() Answer             { return Answer{Allow: true} }
func Deny(reason string) Answer { return Answer{Reason: reason} }

// Settle decides a request once (BOUNDARIES.md, Lifecycle). A request that is not pending comes back unchanged with
// changed false and no boundary. A denial gives denied with the reason. An approval is assessed against the current
// boundary: conflict (explicit_deny, payload_too_large, or boundary_kind_changed when the boundary's kind is not the
// one the request was made against), approved with already_applied, or approved with the new boundary returned
// (next != nil), which the caller stores with the request in one transaction.
func Settle(r Request, current Boundary, d Answer) (settled Request, next *Boundary, changed bool) {
	if r.Status != Pending {
		return r, nil, false
	}
	if !d.Allow {
		r.Status = Denied
		r.Reason = denialReason(d.Reason)
		return r, nil, true
	}
	if current.Kind != r.BaseKind || current.Kind != Managed {
		r.Status, r.Reason = Conflict, ReasonBoundaryKindChanged
		return r, nil, true
	}
	a := Assess(current, r.Expansion)
	r.Status, r.Reason = a.Status, a.Reason
	switch a.Reason {
	case ReasonAlreadyApplied:
		r.Revision = current.Revision
	case ReasonApplied:
		r.Revision = a.Boundary.Revision
		return r, &a.Boundary, true
	}
	return r, nil, true
}

// HostRestarted is what the host does on start to every stored request: a pending one is denied with
// host_restarted; any other comes back unchanged (changed false).
func HostRestarted(r Request) (Request, bool) {
	s, _, changed := Settle(r, Boundary{}, Deny(ReasonHostRestarted))
	return s, changed
}

func denialReason(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ReasonDenied
	}
	if utf8.RuneCountInString(s) > MaxJustification {
		s = string([]rune(s)[:MaxJustification])
	}
	return s
}
