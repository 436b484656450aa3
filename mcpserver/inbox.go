package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/inbox"
)

// hostInbox is the inbox page's Backend over a Host: the inbox knows
// nothing of maiden, and this file translates types and errors.
type hostInbox struct {
	h     *maiden.Host
	audit *auditMemo
}

func newHostInbox(h *maiden.Host) hostInbox { return hostInbox{h: h, audit: &auditMemo{}} }

// auditMemo is where the audit page's last check of the chain ended. A
// check of every record costs the trail's length (seconds a million
// records), and agents make the trail as long as they like, so a view
// checks the records added since the last one, and that the last one's
// last record is still as it was, and every record at most every
// auditWholeEvery.
type auditMemo struct {
	mu    sync.Mutex // one check at a time: views wait for it
	mark  admin.AuditMark
	whole time.Time // when every record was last checked
	now   func() time.Time
}

const auditWholeEvery = 10 * time.Minute

var _ inbox.Backend = hostInbox{}

// inboxErr maps the host's errors to the inbox's (which decide the page's
// status and whether the message is shown); the text is kept.
func inboxErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, maiden.ErrBadOperatorToken):
		return fmt.Errorf("%w: %v", inbox.ErrBadToken, err)
	case errors.Is(err, maiden.ErrUnknownApproval):
		return fmt.Errorf("%w: %v", inbox.ErrNotFound, err)
	case errors.Is(err, maiden.ErrApprovalDecided):
		return fmt.Errorf("%w: %v", inbox.ErrConflict, err)
	case errors.Is(err, maiden.ErrAlwaysRefused):
		return fmt.Errorf("%w: %v", inbox.ErrRefused, err)
	}
	return err
}

func (b hostInbox) AuthenticateOperator(ctx context.Context, token string) (string, error) {
	name, err := b.h.AuthenticateOperator(ctx, token)
	return name, inboxErr(err)
}

func (b hostInbox) Pending(ctx context.Context) ([]inbox.Approval, error) {
	list, err := b.h.Pending(ctx)
	if err != nil {
		return nil, inboxErr(err)
	}
	out := make([]inbox.Approval, len(list))
	for i, a := range list {
		out[i] = inboxApproval(a)
	}
	return out, nil
}

func (b hostInbox) Approval(ctx context.Context, id string) (inbox.Approval, error) {
	a, err := b.h.Approval(ctx, id)
	if err != nil {
		return inbox.Approval{}, inboxErr(err)
	}
	return inboxApproval(a), nil
}

func (b hostInbox) Decide(ctx context.Context, id string, d inbox.Answer) (inbox.Approval, error) {
	a, err := b.h.Decide(ctx, id, maiden.Answer{Approve: d.Approve, Always: d.Always, Grant: d.Grant, By: d.By, Reason: d.Reason})
	if err != nil {
		return inbox.Approval{}, inboxErr(err)
	}
	return inboxApproval(a), nil
}

func inboxApproval(a maiden.ApprovalRequest) inbox.Approval {
	out := inbox.Approval{
		ID: a.ID, Agent: a.Agent, Session: a.Session, Tool: a.Tool, Rendered: a.Rendered, Digest: a.Digest,
		Rule: a.Rule, Reason: a.Reason, Hosts: a.Hosts, Secrets: a.Secrets, Created: a.Created, Expires: a.Expires,
		State: a.State, DecidedBy: a.DecidedBy, Decided: a.Decided, DecisionReason: a.DecisionReason,
		AllowAlways: a.AllowAlways, AlwaysGrant: a.AlwaysGrant, Kind: a.Kind, ToolDigest: a.ToolDigest,
	}
	if p := a.Policy; p != nil {
		out.Limits = fmt.Sprintf("timeout %d ms, memory %d MB", p.TimeoutMS, p.MemoryMB)
	}
	if a.Kind == maiden.RequestBoundary {
		out.Kind, out.Revision, out.AllowAlways, out.AlwaysGrant = inbox.KindBoundary, a.Revision, false, ""
		out.RequestID = strings.TrimPrefix(a.Rule, "request ")
		var x struct {
			Filesystem struct {
				Entries []struct{ Path, Access, Scope string } `json:"entries"`
			} `json:"filesystem"`
			Network struct {
				Enabled bool `json:"enabled"`
			} `json:"network"`
		}
		// The expansion was validated when the request was stored; one
		// that does not decode shows as its JSON (Rendered) only.
		if json.Unmarshal(a.Expansion, &x) == nil {
			for _, e := range x.Filesystem.Entries {
				out.Entries = append(out.Entries, inbox.BoundaryEntry{Path: e.Path, Access: e.Access, Scope: e.Scope})
			}
			out.Network = x.Network.Enabled
		}
	}
	return out
}

// RecentAudit finds the newest sequence number in O(log n) indexed reads
// (is there a record after k?), then reads the last limit records: the
// trail may be long, and the page shows only its end.
func (b hostInbox) RecentAudit(ctx context.Context, limit int) ([]inbox.AuditRecord, error) {
	after := func(k int64) (bool, error) {
		recs, err := b.h.AuditTail(ctx, k, 1)
		return len(recs) > 0, err
	}
	// last is the smallest k with no record after it.
	lo, hi := int64(-1), int64(1) // a record after lo (or lo < 0); none after hi once found
	for {
		more, err := after(hi)
		if err != nil {
			return nil, inboxErr(err)
		}
		if !more {
			break
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		more, err := after(mid)
		if err != nil {
			return nil, inboxErr(err)
		}
		if more {
			lo = mid
		} else {
			hi = mid
		}
	}
	// Read a bounded page at a time, each body cut as it is read: a record
	// holds an agent's input up to max_input_bytes, and a hundred of the
	// largest were hundreds of megabytes read, and sent to the browser,
	// at every view of the page.
	var out []inbox.AuditRecord
	for after := max(0, hi-int64(limit)); len(out) < limit; {
		recs, err := b.h.AuditPage(ctx, after, limit-len(out), admin.AuditPageBytes)
		if err != nil {
			return nil, inboxErr(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			out = append(out, inbox.AuditRecord{Seq: r.Seq, At: r.At, Kind: r.Kind, Actor: r.Actor, Agent: r.Agent, Tool: r.Tool, Body: shownBody(r.Body), Hash: r.Hash})
			after = r.Seq
		}
	}
	slices.Reverse(out)
	return out, nil
}

// shownBodyBytes is how much of a body the inbox's audit view shows.
const shownBodyBytes = 4 << 10

// shownBody is body as the inbox shows it: whole up to shownBodyBytes,
// else cut there (at a character's start) and saying so.
func shownBody(body []byte) string {
	if len(body) <= shownBodyBytes {
		return string(body)
	}
	n := shownBodyBytes
	for n > 0 && !utf8.RuneStart(body[n]) {
		n--
	}
	return fmt.Sprintf("%s… [cut: %d bytes in all; maiden audit tail -json shows the record whole]", body[:n], len(body))
}

func (b hostInbox) VerifyAudit(ctx context.Context) (inbox.AuditCheck, error) {
	m := b.audit
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now
	if m.now != nil {
		now = m.now
	}
	t := now()
	whole := m.mark.Seq == 0 || t.Sub(m.whole) >= auditWholeEvery
	// The mark goes with a whole check too: a chain that verifies
	// without its record in it was rewritten or cut since.
	mark, err := b.h.VerifyAuditFrom(ctx, m.mark, whole)
	if errors.Is(err, admin.ErrAuditBroken) {
		// The mark is kept: the next view finds the problem again (a
		// check from the start alone would pass a rewritten chain).
		return inbox.AuditCheck{Records: mark.Records}, fmt.Errorf("%w: %v", inbox.ErrAuditBroken, err)
	}
	if err != nil {
		return inbox.AuditCheck{}, err
	}
	c := inbox.AuditCheck{Records: mark.Records}
	if whole {
		m.whole = t
	} else {
		c.Whole, c.Read = m.whole, mark.Records-m.mark.Records
	}
	m.mark = mark
	return c, nil
}

func (b hostInbox) Agents(context.Context) ([]string, error) {
	var out []string
	for _, a := range b.h.Config().Agents() {
		out = append(out, a.Name)
	}
	return out, nil
}

// cardHost is what the cards page needs of the Host: an agent's cards
// (revoked ones included) and revoking one as an operator (Host.Cards,
// Host.RevokeCard). Asked of the Host by interface, so that a Host
// without them would answer that the cards are unavailable, the log
// saying why (errNoCards).
type cardHost interface {
	Cards(ctx context.Context, agent string) ([]api.Card, error)
	RevokeCard(ctx context.Context, id, by string) (revoked int, err error)
}

// errNoCards: the Host has no cardHost methods.
var errNoCards = errors.New("the cards page needs Host.Cards and Host.RevokeCard, which this build of maiden does not have")

func (b hostInbox) Cards(ctx context.Context, agent string) ([]inbox.Card, error) {
	ch, ok := any(b.h).(cardHost)
	if !ok {
		return nil, errNoCards
	}
	list, err := ch.Cards(ctx, agent)
	if err != nil {
		return nil, inboxErr(err)
	}
	out := make([]inbox.Card, len(list))
	for i, c := range list {
		out[i] = inbox.Card{
			ID: c.ID, Agent: c.Holder, Allows: grantTexts(c.LowerPos), Except: grantTexts(c.LowerNeg),
			Ceiling: grantTexts(c.UpperPos), Forbids: grantTexts(c.UpperNeg), Parents: c.Parents, System: c.System,
			Manager: c.Manager, Created: c.Created, Expires: c.Expires, Revoked: c.Revoked,
		}
	}
	return out, nil
}

func grantTexts(gs []api.CardGrant) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.String()
	}
	return out
}

func (b hostInbox) RevokeCard(ctx context.Context, id, by string) (int, error) {
	ch, ok := any(b.h).(cardHost)
	if !ok {
		return 0, errNoCards
	}
	n, err := ch.RevokeCard(ctx, id, by)
	switch {
	case errors.Is(err, admin.ErrUnknownCard):
		return 0, fmt.Errorf("%w: %v", inbox.ErrNotFound, err)
	case errors.Is(err, admin.ErrCardRevoked):
		return 0, fmt.Errorf("%w: %v", inbox.ErrConflict, err)
	}
	return n, inboxErr(err)
}

var _ inbox.NewlyBackend = hostInbox{}

// Newly is Host.ApprovalNewlyPossible over the last week of calls
// (admin.DefaultWhatIfWindow), in the inbox's types.
func (b hostInbox) Newly(ctx context.Context, id, grant string) (inbox.Newly, error) {
	np, err := b.h.ApprovalNewlyPossible(ctx, id, grant, time.Now().Add(-admin.DefaultWhatIfWindow))
	if err != nil {
		return inbox.Newly{}, inboxErr(err)
	}
	out := inbox.Newly{Window: admin.DefaultWhatIfWindow, Beyond: np.Beyond, Redundant: np.Redundant, Calls: np.Calls,
		NotReplayable: np.NotReplayable, NotReplayableWhy: np.NotReplayableWhy}
	for _, ex := range np.Examples {
		out.Examples = append(out.Examples, inbox.NewlyCall{Seq: ex.Seq, At: ex.At, Target: ex.Target, Asked: ex.Recorded.Rule == api.RuleAsked})
	}
	return out, nil
}
