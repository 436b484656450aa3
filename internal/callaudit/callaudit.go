// Package callaudit is the audit trail of calls (X3): the records a call
// writes to the state store's hash-chained trail and how they get there.
// A call admitted (with the cards' decision and the middleware verdicts
// that let it through) is recorded before its tool runs, and if the record
// cannot be written the call is refused, never run unaudited; a call
// refused, each http-fetch decision and a failure after admission are
// recorded too. The root's stages decide when (callaudit.go there); this
// package encodes the records (Record, by hand on the path every call
// takes) and writes them (Trail: the store getter and the logger given,
// no Host), through the store's audit journal when it has one.
//
//	t := &callaudit.Trail{State: getStore, Log: logger}
//	err := t.AppendRecord(ctx, callaudit.Call{Cfg: cfg, Agent: a, Tool: name}, store.AuditCallAdmitted, &rec)
package callaudit

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// KindCallFailed is the audit kind of a call that failed after its
// call-admitted record (a deadline, a trap, a refused fetch, an output a
// layer withheld).
const KindCallFailed = store.AuditCallFailed

// KindCallSucceeded is the audit kind of a call that returned its tool's
// output after its call-admitted record: the outcome (duration, the tool's
// kind, the output's size), so that every admitted call has exactly one
// outcome record (call-succeeded or call-failed) beside its admission.
const KindCallSucceeded = store.AuditCallSucceeded

// Record is the body of a call's audit records; V is a middleware layer's
// verdict as the trail records it (encoded by encoding/json).
type Record[V any] struct {
	Session  string `json:"session,omitempty"`
	Rendered string `json:"rendered"`
	Card     string `json:"card,omitempty"`
	// Component is the digest of the WebAssembly component the call runs,
	// the one a grant naming a digest compares (the provenance chain:
	// signature, digest, this record): an oci:// tool's pinned manifest
	// digest, or with ComponentLocal a local file's sha256 of its bytes as
	// loaded. Signer is the ID of the key (or keyless identity) whose
	// signature over an oci:// digest verified when the configuration
	// loaded; absent when none did, and always for a local file. Absent,
	// both, for a wrapped CLI, an MCP import and a built-in (no component),
	// for a file that did not load, and in records made before a local
	// file's digest was recorded.
	Component      string `json:"component,omitempty"`
	ComponentLocal bool   `json:"component_local,omitempty"`
	Signer         string `json:"signer,omitempty"`
	// Schema is the hash of the definition the component reported
	// (oci.SchemaDoc over its description, input and output schema: what
	// an oci:// tool's schema pin compares and tools/list's _meta names),
	// for a WebAssembly tool whose component loaded; absent otherwise.
	Schema string `json:"schema,omitempty"`
	// Decision is the cards' answer about the call as Decide returned it
	// (authorize, or the last re-decision of a rewrite or a long approval
	// wait): the deciding card, bound and grant; on a denial also the
	// reason, rule, target and fix. An allowed call's record leaves out
	// its target and rule, which are its tool and rendering and its card,
	// bound and grant. Absent when the cards were not asked (the implicit
	// agent, a card built-in, a call refused before authorization).
	Decision *api.Decision `json:"decision,omitempty"`
	// BeforeRewrite are the decisions of the cards on each input a
	// middleware layer then rewrote, in order, the agent's own first:
	// what a replay needs for a change that revokes the card that allowed
	// the agent's input (the call would then have been refused before the
	// rewrite). Decision is the one on the last input. At most
	// MaxRewrites; RewritesTruncated marks a list that was cut, so that a
	// replay knows the record is partial.
	BeforeRewrite     []Rewritten `json:"before_rewrite,omitempty"`
	RewritesTruncated bool        `json:"before_rewrite_truncated,omitempty"`
	// FS are the filesystem decisions of the agent's cards made for the
	// call (a session's preopens: fs:read DIR/**, and fs:write DIR/** for
	// a writable one, decide.AccessTree), whole, each naming its target,
	// in the order they were asked: the ones in force when the tool ran
	// (a call-admitted record's). At most MaxFSDecisions; FSTruncated
	// marks a list that was cut.
	FS          []api.Decision `json:"fs,omitempty"`
	FSTruncated bool           `json:"fs_truncated,omitempty"`
	// SecretUse is the cards' decision on secret:use of the credential
	// the host itself attaches to the call (an imported MCP server's
	// credential, which maiden sends the server outside the egress gate),
	// whole, naming its target ("secret:use NAME"): asked once the call's
	// tool:invoke (of the agent's own input, before any rewrite) allowed
	// it; a denial refused the call. An allowed one without its rule.
	// Absent for a call that sends no such credential, for the implicit
	// agent, for a call refused before it was asked, and in records made
	// before it was recorded.
	SecretUse  *api.Decision `json:"secret_use,omitempty"`
	Middleware []V           `json:"middleware,omitempty"`
	Approval   string        `json:"approval,omitempty"`
	// Budget names the budgets the call spent (internal/budget's
	// Meter.Record): the card, what it reserved, what its chain had left.
	Budget     string        `json:"budget,omitempty"`
	Kind       api.ErrorKind `json:"kind,omitempty"`
	Message    string        `json:"message,omitempty"`
	Error      string        `json:"error,omitempty"`
	DurationMS int64         `json:"duration_ms,omitempty"`
	// ToolKind is the tool's kind (wasm, cli, mcp, builtin), in an
	// outcome record and a refused call's (so that a replay tells a
	// built-in from a [tools] entry of its name); OutputBytes the size of
	// what it returned: an outcome record's.
	ToolKind    string `json:"tool_kind,omitempty"`
	OutputBytes int64  `json:"output_bytes,omitempty"`
	// BoundaryRevision is the revision of the session's boundary the call
	// was decided under (a refused or failed call of a session): what a
	// replay of a boundary expansion needs to know the call was refused
	// by that boundary (internal/whatif). Absent when the call had no
	// session, and in records made before it was recorded.
	BoundaryRevision *int64 `json:"boundary_revision,omitempty"`
	// TraceID is the W3C trace the call's spans belong to (the client's,
	// from its traceparent, or one maiden started): hex, absent when the
	// call was not traced.
	TraceID string `json:"trace_id,omitempty"`
}

// Caps of the decision lists of one record, so that a record stays small
// whatever the configuration: a session's preopens ask at most two
// questions a directory (sandbox.MaxPreopens directories), and a chain
// rewrites once a layer.
// A rendering before a rewrite is as long as the input was (up to the
// input limit): the agent's own is always kept, the later ones only while
// they add up to at most MaxRewriteBytes.
const (
	MaxFSDecisions  = 32
	MaxRewrites     = 8
	MaxRewriteBytes = 64 << 10
)

// Rewritten is the decision on an input a middleware layer then rewrote:
// the input's canonical rendering and the cards' decision on it (as
// Decision: an allowed one without its target and rule).
type Rewritten struct {
	Rendered string        `json:"rendered"`
	Decision *api.Decision `json:"decision"`
}

// KeepRewrite appends r to list within MaxRewrites and MaxRewriteBytes
// (the first entry, the agent's own input, always fits); cut reports an
// entry left out, after which a caller appends no more (the list keeps
// the decisions in the order they were made, from the first).
func KeepRewrite(list []Rewritten, r Rewritten) (_ []Rewritten, cut bool) {
	if len(list) == 0 {
		return append(list, r), false
	}
	n := len(r.Rendered)
	for _, x := range list[1:] {
		n += len(x.Rendered)
	}
	if len(list) >= MaxRewrites || n > MaxRewriteBytes {
		return list, true
	}
	return append(list, r), false
}

// Capped is list cut to at most limit entries, and whether it was cut.
func Capped[T any](list []T, limit int) ([]T, bool) {
	if len(list) > limit {
		return list[:limit:limit], true
	}
	return list, false
}

// appendJSONField appends ,"name":JSON(v) to b.
func appendJSONField(b []byte, name string, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return append(b, j...), nil
}

// AppendJSON encodes r as JSON onto b: by hand on the path every call
// takes (json.Marshal of this struct costs about a microsecond, a
// twentieth of the tiny call), by encoding/json for the verdicts.
func (r *Record[V]) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	field := func(name, v string) {
		if v == "" {
			return
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = appendJSONString(b, v)
	}
	field("session", r.Session)
	if len(b) > 1 {
		b = append(b, ',')
	}
	b = append(b, `"rendered":`...)
	b = appendJSONString(b, r.Rendered)
	field("card", r.Card)
	field("component", r.Component)
	if r.ComponentLocal {
		b = append(b, `,"component_local":true`...)
	}
	field("signer", r.Signer)
	field("schema", r.Schema)
	if d := r.Decision; d != nil {
		b = append(b, `,"decision":{"allow":`...)
		b = strconv.AppendBool(b, d.Allow)
		field("reason", d.Reason)
		field("rule", d.Rule)
		field("card", d.Card)
		field("bound", d.Bound)
		field("grant", d.Grant)
		field("target", d.Target)
		field("fix", d.Fix)
		field("wallet", d.Wallet)
		field("component", d.Component)
		b = append(b, '}')
	}
	// Rare (a rewrite, a session's preopens, an import's credential,
	// middleware verdicts): encoding/json.
	var err error
	if len(r.BeforeRewrite) > 0 {
		if b, err = appendJSONField(b, "before_rewrite", r.BeforeRewrite); err != nil {
			return nil, err
		}
	}
	if r.RewritesTruncated {
		b = append(b, `,"before_rewrite_truncated":true`...)
	}
	if len(r.FS) > 0 {
		if b, err = appendJSONField(b, "fs", r.FS); err != nil {
			return nil, err
		}
	}
	if r.FSTruncated {
		b = append(b, `,"fs_truncated":true`...)
	}
	if r.SecretUse != nil {
		if b, err = appendJSONField(b, "secret_use", r.SecretUse); err != nil {
			return nil, err
		}
	}
	if len(r.Middleware) > 0 {
		if b, err = appendJSONField(b, "middleware", r.Middleware); err != nil {
			return nil, err
		}
	}
	field("approval", r.Approval)
	field("budget", r.Budget)
	field("kind", string(r.Kind))
	field("message", r.Message)
	field("error", r.Error)
	if r.DurationMS != 0 {
		b = append(b, `,"duration_ms":`...)
		b = strconv.AppendInt(b, r.DurationMS, 10)
	}
	field("tool_kind", r.ToolKind)
	if r.OutputBytes != 0 {
		b = append(b, `,"output_bytes":`...)
		b = strconv.AppendInt(b, r.OutputBytes, 10)
	}
	if r.BoundaryRevision != nil {
		b = append(b, `,"boundary_revision":`...)
		b = strconv.AppendInt(b, *r.BoundaryRevision, 10)
	}
	field("trace_id", r.TraceID)
	return append(b, '}'), nil
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD (as
// encoding/json does, without its HTML escaping). Runs that need no
// escaping (digests, renderings, most text) are copied whole.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0 // s[start:i] needs no escaping and is not yet appended
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Trail writes a call's records: State is the store of a configuration
// (the Host's, opened and synced on first need), Log where a record that
// could not be written is reported.
type Trail struct {
	State func(ctx context.Context, cfg *config.Config) (store.Store, error)
	Log   *slog.Logger
}

// Call is whose record it is: the configuration the call runs under, its
// agent and tool.
type Call struct {
	Cfg   *config.Config
	Agent string
	Tool  string
}

// Event appends a record about the call that is not a decision (an
// approval requested, a fetch): a failure is logged, not fatal.
func (t *Trail) Event(ctx context.Context, c Call, kind string, body any) {
	if err := t.Append(context.WithoutCancel(ctx), c, kind, body); err != nil {
		t.Log.Error("audit record not written", "kind", kind, "agent", c.Agent, "tool", c.Tool, "err", err)
	}
}

// Append writes one record of the call, body encoded by encoding/json.
func (t *Trail) Append(ctx context.Context, c Call, kind string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return t.appendRaw(ctx, c, kind, b)
}

// AppendRecord writes a call's own record.
func AppendRecord[V any](ctx context.Context, t *Trail, c Call, kind string, rec *Record[V]) error {
	st, err := t.State(ctx, c.Cfg)
	if err != nil {
		return err
	}
	w := sink(st)
	if j, ok := w.(journalAudit); ok {
		// The journal copies the body before Append returns: its buffer
		// is used again by the next record (it was two or three
		// allocations, about 1 KiB, of every call).
		bp := bodyPool.Get().(*[]byte)
		b, err := rec.AppendJSON((*bp)[:0])
		if err == nil {
			err = j.append(ctx, t.record(c, kind, b))
		}
		if cap(b) <= maxPooledBody {
			*bp = b[:0]
			bodyPool.Put(bp)
		}
		return err
	}
	b, err := rec.AppendJSON(nil)
	if err != nil {
		return err
	}
	return w.append(ctx, t.record(c, kind, b))
}

// bodyPool holds the buffers AppendRecord encodes bodies into for the
// journal; one grown beyond maxPooledBody is let go.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledBody = 64 << 10

func (t *Trail) appendRaw(ctx context.Context, c Call, kind string, body []byte) error {
	st, err := t.State(ctx, c.Cfg)
	if err != nil {
		return err
	}
	return sink(st).append(ctx, t.record(c, kind, body))
}

// record is the store's form of a record of the call.
func (t *Trail) record(c Call, kind string, body []byte) store.AuditRecord {
	return store.AuditRecord{At: time.Now(), Kind: kind, Actor: "agent:" + c.Agent, Agent: c.Agent, Tool: c.Tool, Body: body}
}

// writer is how records reach the trail: the store's audit journal (an
// append that survives kill -9 once it returns, ingested into the chain in
// batches: internal/store journal.go), or a transaction per record for a
// store without one.
type writer interface {
	append(ctx context.Context, r store.AuditRecord) error
}

type journalAudit struct{ j *store.Journal }

func (a journalAudit) append(_ context.Context, r store.AuditRecord) error { return a.j.Append(r) }

func (a journalAudit) appendReserved(r store.AuditRecord, res *store.Reservation) error {
	return a.j.AppendReserved(r, res)
}

type storeAudit struct{ st store.Store }

func (s storeAudit) append(ctx context.Context, r store.AuditRecord) error {
	_, err := s.st.AppendAudit(ctx, r)
	return err
}

func sink(st store.Store) writer {
	if j, ok := st.(interface{ Journal() *store.Journal }); ok && j.Journal() != nil {
		return journalAudit{j.Journal()}
	}
	return storeAudit{st}
}

// Flush waits until every record this process appended is in the chain.
func Flush(ctx context.Context, st store.Store) error {
	if j, ok := st.(interface{ Journal() *store.Journal }); ok && j.Journal() != nil {
		return j.Journal().Flush(ctx)
	}
	return nil
}

// Pending is the room taken in the trail for one record of a call that
// is written after what it records has happened (Trail.Reserve): a
// request's fetch record, written once the request went out.
type Pending struct {
	t     *Trail
	c     Call
	w     writer
	res   store.Reservation // its owner: whoever set spent
	spent atomic.Bool       // Event or Release was called
}

// Reserve makes sure a record of the call of about n bytes can be written
// after what it records has happened, before that happens: it takes the
// room in the store's audit journal (store.Journal.Reserve: an atomic
// add), refused when the journal's backlog is past its bound or the
// journal cannot be written. A refusal must stop what the record would
// describe (RefusalReason says why to whoever asked): a fetch sent with
// no record would have its effect unaudited. The record is then written
// by Pending.Event, or the room given back by Release. A store without a
// journal takes no room (its records are transactions of their own).
func (t *Trail) Reserve(ctx context.Context, c Call, n int64) (*Pending, error) {
	st, err := t.State(ctx, c.Cfg)
	if err != nil {
		return nil, err
	}
	p := &Pending{t: t, c: c, w: sink(st)}
	if j, ok := p.w.(journalAudit); ok {
		if p.res, err = j.j.Reserve(n); err != nil {
			t.Log.Error("audit record refused before its request: the request is refused", "agent", c.Agent, "tool", c.Tool, "err", err)
			return nil, err
		}
	}
	return p, nil
}

// Event writes the record (body encoded by encoding/json) in the room
// taken: not refused for the journal's backlog; another failure (a
// journal closed meanwhile, a disk that failed) is logged, as Trail.Event
// does. Once only: a second Event of one Pending is Trail.Event's.
func (p *Pending) Event(ctx context.Context, kind string, body any) {
	if p.spent.Swap(true) {
		p.t.Event(ctx, p.c, kind, body)
		return
	}
	b, err := json.Marshal(body)
	if err == nil {
		r := p.t.record(p.c, kind, b)
		if j, ok := p.w.(journalAudit); ok {
			err = j.appendReserved(r, &p.res)
		} else {
			err = p.w.append(context.WithoutCancel(ctx), r)
		}
	}
	p.res.Release()
	if err != nil {
		p.t.Log.Error("audit record not written", "kind", kind, "agent", p.c.Agent, "tool", p.c.Tool, "err", err)
	}
}

// Release gives back the room of a record that will not be written (a
// no-op after Event; an Event after it writes the record without the
// room, as Trail.Event). Safe to call concurrently with Event.
func (p *Pending) Release() {
	if !p.spent.Swap(true) {
		p.res.Release()
	}
}

// FetchRecordSize is the room Reserve takes for the fetch record of a
// request to rawURL with credential: more than such a record takes (its
// method, host, path, credential's name and the cards' decisions about
// the request, encoded), so that the journal's bound holds.
func FetchRecordSize(rawURL, credential string) int64 {
	return 4<<10 + 2*int64(len(rawURL)+len(credential))
}

// TunnelRecordSize is the room Reserve takes for the record of one CONNECT
// tunnel (TunnelBody: the host, the gate's rule and reason, the cards'
// decisions), more than one takes.
const TunnelRecordSize = 8 << 10

// RuleAuditTrail is the rule of a request refused because its audit
// record could not be written (Trail.Reserve refused): nothing was sent.
const RuleAuditTrail = "audit-trail"

// RefusalReason is what the tool (and its caller) is told of a request
// refused because Trail.Reserve refused its record's room (err): what
// (a "fetch", a "tunnel") and the cause in general terms, never the
// journal's path (the full error goes to the operator's log).
func RefusalReason(what string, err error) string {
	cause := "it cannot be written"
	switch {
	case errors.Is(err, store.ErrJournalFull):
		cause = "its journal's backlog is past its bound: the state store is not keeping up or cannot be written"
	case errors.Is(err, store.ErrJournalClosed):
		cause = "its journal is closed"
	}
	return "the audit trail cannot take this " + what + "'s record (" + cause + "), so it was not sent"
}

// Fetch wraps a call's http-fetch so that each request's decision is a
// record of the trail (method, host, path without the query, the
// credential's name, allowed or the rule that refused, the status; never a
// secret value, never the body), written by record in the room reserve
// took before the request was sent. A request whose room reserve refuses
// is refused (denied, RefusalReason) before anything is sent: no request
// goes out that its record could not follow. decisions, if not nil, gives
// each request a context in which the calling agent's cards note what
// they decided about it (callegress.Decisions): the record carries them
// as "decisions", as Decide returned them.
func Fetch(fetch sandbox.FetchFunc, decisions func(context.Context) (context.Context, func() []api.Decision), reserve func(context.Context, sandbox.FetchRequest) (*Pending, error), record func(p *Pending, body map[string]any)) sandbox.FetchFunc {
	return func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		p, err := reserve(ctx, req)
		if err != nil {
			return nil, &sandbox.FetchError{Kind: sandbox.FetchDenied, Message: RefusalReason("fetch", err)}
		}
		defer p.Release() // a fetch that panicked: its room is not held forever
		var decided func() []api.Decision
		if decisions != nil {
			ctx, decided = decisions(ctx)
		}
		resp, ferr := fetch(ctx, req)
		var ds []api.Decision
		if decided != nil {
			ds = decided()
		}
		out := outcome{}
		if ferr != nil {
			out.err, out.denied = string(ferr.Kind), ferr.Kind == sandbox.FetchDenied
		} else {
			out.status = resp.Status
		}
		record(p, fetchBody(req.Method, req.URL, req.Credential, ds, out))
		return resp, ferr
	}
}
