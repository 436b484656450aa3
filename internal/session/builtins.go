package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/boundary"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/store"
)

// BoundaryStage is the stage named in request_sandbox_boundary's
// structured errors.
const BoundaryStage = "request_sandbox_boundary"

// Settled is request_sandbox_boundary's answer for a settled
// request: a result for an approval, the structured error otherwise.
func Settled(r store.BoundaryRequest) (any, *api.ToolError, error) {
	q := r.Request
	switch q.Status {
	case boundary.Approved:
		return map[string]any{"status": string(q.Status), "reason": q.Reason, "requestId": q.ID, "handle": r.Handle, "revision": q.Revision}, nil, nil
	case boundary.Pending:
		return nil, &api.ToolError{Kind: api.KindPending, Approval: r.Handle, Message: fmt.Sprintf("boundary request %s is still waiting for a decision", r.Handle)}, nil
	}
	msg := fmt.Sprintf("boundary request %s was %s (%s)", q.ID, q.Status, q.Reason)
	return nil, Outcome(string(q.Status), q.Reason, q.ID, r.Handle, msg), nil
}

// Outcome is a request that did not widen the boundary, as the
// structured error of BOUNDARIES.md plus its status.
func Outcome(status, reason, id, handle, message string) *api.ToolError {
	e := boundary.Refused(boundary.DomainCommand, BoundaryStage, reason, message)
	if e.Validate() != nil { // an operator's free-text reason: kept in the message
		e = boundary.Refused(boundary.DomainCommand, BoundaryStage, boundary.ReasonDenied, message)
	}
	if boundaryIDOK(id) {
		e.RequestID = id
	}
	raw, _ := json.Marshal(e)
	var obj map[string]any
	_ = json.Unmarshal(raw, &obj)
	obj["status"] = status
	if handle != "" {
		obj["handle"] = handle
	}
	raw, _ = json.Marshal(obj)
	return &api.ToolError{Kind: api.KindDenied, Message: message, Structured: raw}
}

// boundaryIDOK reports whether id is a valid request ID of BOUNDARIES.md.
func boundaryIDOK(id string) bool { return requestIDPattern.MatchString(id) }

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Failure is a session built-in's failure as the caller sees it:
// the boundary's structured error, or the built-in's own (its reason and
// target), kind input for what the caller got wrong and tool otherwise.
func Failure(err error) *api.ToolError {
	var ce *boundary.CommandError
	if errors.As(err, &ce) {
		return BoundaryError(ce)
	}
	var be *hostfs.Error
	if errors.As(err, &be) {
		raw, _ := json.Marshal(be)
		kind := api.KindTool
		switch be.Reason {
		case hostfs.ReasonInvalidInput, hostfs.ReasonInvalidPath, hostfs.ReasonPathTooLong, hostfs.ReasonNotFound,
			hostfs.ReasonIsDirectory, hostfs.ReasonNotDirectory, hostfs.ReasonNotRegular, hostfs.ReasonTooLarge:
			kind = api.KindInput
		case hostfs.ReasonSymlinkEscape, hostfs.ReasonSymlink, hostfs.ReasonFetchDenied, hostfs.ReasonNoCard:
			kind = api.KindDenied
		case hostfs.ReasonFetchTimeout:
			kind = api.KindDeadline
		}
		return &api.ToolError{Kind: kind, Message: be.Error(), Structured: raw}
	}
	return &api.ToolError{Kind: api.KindTool, Message: err.Error()}
}
