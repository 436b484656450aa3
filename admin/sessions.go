package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is sessions as operators see them: every call runs in a
// session of its agent, whose sandbox boundary (docs/boundaries.md) says
// which paths its calls may read or write and whether they may use the
// network.

// ErrUnknownSession: no session of that ID in the store.
var ErrUnknownSession = errors.New("unknown session")

// Sessions lists agent's sessions ("" for every agent's), ended ones
// included, each with its current boundary.
func (s *State) Sessions(ctx context.Context, agent string) ([]api.SessionInfo, error) {
	list, err := s.st.Sessions(ctx, agent)
	if err != nil {
		return nil, err
	}
	out := make([]api.SessionInfo, len(list))
	for i, ss := range list {
		out[i] = adminlink.Session(ss)
	}
	return out, nil
}

// Session returns one session with every revision of its boundary and
// every boundary request; an unknown ID is ErrUnknownSession.
func (s *State) Session(ctx context.Context, id string) (api.SessionInfo, error) {
	ss, err := s.st.Session(ctx, id)
	if errors.Is(err, store.ErrUnknownSession) {
		return api.SessionInfo{}, fmt.Errorf("%w %q", ErrUnknownSession, id)
	}
	if err != nil {
		return api.SessionInfo{}, err
	}
	revs, err := s.st.Revisions(ctx, id)
	if err != nil {
		return api.SessionInfo{}, err
	}
	reqs, err := s.st.BoundaryRequestsOf(ctx, id)
	if err != nil {
		return api.SessionInfo{}, err
	}
	out := adminlink.Session(ss)
	out.Revisions, out.Requests = adminlink.Revisions(revs), adminlink.BoundaryRequests(reqs)
	return out, nil
}

// ResetSession makes b session id's next boundary revision, by the
// operator by (audited). A running Host drops the session's secret
// material on a downgrade only through its own Host.ResetSession.
func (s *State) ResetSession(ctx context.Context, id string, b api.Boundary, by string) (api.SessionInfo, error) {
	ss, err := s.st.ResetSession(ctx, id, adminlink.FromBoundary(b), by)
	if errors.Is(err, store.ErrUnknownSession) {
		return api.SessionInfo{}, fmt.Errorf("%w %q", ErrUnknownSession, id)
	}
	if err != nil {
		return api.SessionInfo{}, err
	}
	return adminlink.Session(ss), nil
}

// EndSession ends session id by the operator by (audited: the
// session-ended record's actor): its boundary stops applying, a later call
// naming it is refused in every process sharing the store, and its pending
// boundary requests are denied (session_ended). ended is false when it had
// ended already (nothing changed). A call of the session already running
// runs to its end; a running Host drops the session's secret material at
// once only through its own Host.EndSession (the next call finds the
// session ended either way).
func (s *State) EndSession(ctx context.Context, id, by string) (ended bool, err error) {
	ended, err = s.st.EndSessionAs(ctx, id, by)
	if errors.Is(err, store.ErrUnknownSession) {
		return false, fmt.Errorf("%w %q", ErrUnknownSession, id)
	}
	return ended, err
}
