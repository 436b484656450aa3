package callaudit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/store"
)

// openStore is a real SQLite store in the test's directory, its journal
// bounded to backlog bytes (0: the default) and ingesting only when asked.
func openStore(t *testing.T, backlog int64) *store.DB {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), &store.Options{JournalBacklog: backlog, JournalInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func trailOf(st store.Store, log *bytes.Buffer) *Trail {
	l := slog.New(slog.DiscardHandler)
	if log != nil {
		l = slog.New(slog.NewTextHandler(log, nil))
	}
	return &Trail{State: func(context.Context, *config.Config) (store.Store, error) { return st, nil }, Log: l}
}

// records is the trail's bodies of kind, once everything appended is in it.
func records(t *testing.T, st store.Store, kind string) []map[string]any {
	t.Helper()
	ctx := context.Background()
	if err := Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	recs, err := st.AuditTail(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, r := range recs {
		if r.Kind != kind {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatalf("record %d: %v: %s", r.Seq, err, r.Body)
		}
		out = append(out, m)
	}
	return out
}

// TestKeepRewriteAtItsByteCap: the renderings after the agent's own are
// kept while they add up to MaxRewriteBytes exactly; one byte more cuts.
func TestKeepRewriteAtItsByteCap(t *testing.T) {
	list, _ := KeepRewrite(nil, Rewritten{Rendered: "the agent's own"})
	list, cut := KeepRewrite(list, Rewritten{Rendered: strings.Repeat("x", MaxRewriteBytes-1)})
	if cut {
		t.Fatal("a rendering of MaxRewriteBytes-1 cut")
	}
	if list, cut = KeepRewrite(list, Rewritten{Rendered: "y"}); len(list) != 3 || cut {
		t.Fatalf("later renderings of MaxRewriteBytes in all: kept %d, cut %v; want 3 kept", len(list), cut)
	}
	if list, cut = KeepRewrite(list, Rewritten{Rendered: "z"}); len(list) != 3 || !cut {
		t.Fatalf("later renderings of MaxRewriteBytes+1 in all: kept %d, cut %v; want the last cut", len(list), cut)
	}
}

// TestCappedAtItsLimit: a list of exactly limit entries is whole, not cut;
// one more is cut to limit, and what is appended to the cut list never
// lands in the entries cut off.
func TestCappedAtItsLimit(t *testing.T) {
	list := []int{1, 2, 3}
	if got, cut := Capped(list, 3); len(got) != 3 || cut {
		t.Fatalf("Capped of 3 entries to 3: %v, cut %v; want all, not cut", got, cut)
	}
	list = append(list, 4)
	got, cut := Capped(list, 3)
	if !reflect.DeepEqual(got, []int{1, 2, 3}) || !cut {
		t.Fatalf("Capped of 4 entries to 3: %v, cut %v; want [1 2 3], cut", got, cut)
	}
	_ = append(got, 9)
	if list[3] != 4 {
		t.Fatalf("appending to the capped list overwrote the entry cut off: %v", list)
	}
}

// TestRecordOfInvalidUTF8IsWritten: a record whose strings hold invalid
// UTF-8 (a tool's error, its message) is encoded as UTF-8, U+FFFD for each
// bad byte, and so is written: the journal refuses a body that is not
// UTF-8, which would lose the record of the call.
func TestRecordOfInvalidUTF8IsWritten(t *testing.T) {
	bad := "bad \xff\xfe bytes"
	rec := callRecord{Rendered: bad, Kind: api.KindTool, Message: bad, Error: bad, Decision: &api.Decision{Reason: bad, Target: bad}}
	b, err := rec.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(b) {
		t.Fatalf("the encoded record is not UTF-8: %q", b)
	}
	st := openStore(t, 0)
	if err := AppendRecord(context.Background(), trailOf(st, nil), Call{Agent: "a", Tool: "t"}, KindCallFailed, &rec); err != nil {
		t.Fatalf("AppendRecord of a record with invalid UTF-8: %v; want it written", err)
	}
	got := records(t, st, KindCallFailed)
	if len(got) != 1 || got[0]["error"] != "bad \ufffd\ufffd bytes" {
		t.Fatalf("records in the trail: %v; want the one, its error with U+FFFD for the bad bytes", got)
	}
}

// TestAppendRecordConcurrently: calls writing their records at once each
// get their own buffer from the pool until the journal has copied the
// body: every record reaches the chain whole, none mixed with another's.
// Run with -race.
func TestAppendRecordConcurrently(t *testing.T) {
	st := openStore(t, 0)
	tr := trailOf(st, nil)
	want := map[string]bool{}
	var wg sync.WaitGroup
	for g := range 6 {
		for i := range 40 {
			want[fmt.Sprintf("g%d-%d-%s", g, i, strings.Repeat("x", (g*40+i)%97*7))] = true
		}
		wg.Go(func() {
			for i := range 40 {
				r := fmt.Sprintf("g%d-%d-%s", g, i, strings.Repeat("x", (g*40+i)%97*7))
				if err := AppendRecord(context.Background(), tr, Call{Agent: "a", Tool: "t"}, KindCallSucceeded, &callRecord{Rendered: r, DurationMS: int64(len(r))}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, m := range records(t, st, KindCallSucceeded) {
		r, _ := m["rendered"].(string)
		if d, _ := m["duration_ms"].(float64); int(d) != len(r) || !want[r] {
			t.Fatalf("a record mixes two calls' bodies: rendered %.40q…, duration_ms %v", r, m["duration_ms"])
		}
		delete(want, r)
	}
	if len(want) != 0 {
		t.Fatalf("%d records missing from the trail", len(want))
	}
}

// noJournal is a store without an audit journal: its records are
// transactions of their own.
type noJournal struct{ store.Store }

func (noJournal) Journal() *store.Journal { return nil }

// TestEventAfterTheCallsContextEnded: an event about a call (an approval
// requested, a fetch) is recorded even when the call's context has ended
// (the caller gave up): it happened.
func TestEventAfterTheCallsContextEnded(t *testing.T) {
	st := openStore(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var log bytes.Buffer
	trailOf(noJournal{st}, &log).Event(ctx, Call{Agent: "a", Tool: "t"}, store.AuditFetch, map[string]any{"host": "api.example.com"})
	if got := records(t, st, store.AuditFetch); len(got) != 1 {
		t.Fatalf("fetch records after an event of an ended call: %v (log: %s); want it written", got, log.String())
	}
}

// TestReservedRoom: Reserve takes room in the journal and refuses past its
// bound (ErrJournalFull); Release gives it back, and so does Event, whether
// or not it could write the record; Event writes it in the room.
func TestReservedRoom(t *testing.T) {
	const bound = 64 << 10
	st := openStore(t, bound)
	var log bytes.Buffer
	tr := trailOf(st, &log)
	ctx, c := context.Background(), Call{Agent: "a", Tool: "t"}
	if p, err := tr.Reserve(ctx, c, bound+1); !errors.Is(err, store.ErrJournalFull) || p != nil {
		t.Fatalf("Reserve past the bound: %v, %v; want ErrJournalFull and no Pending", p, err)
	}
	half := int64(bound/2 + 1)
	p, err := tr.Reserve(ctx, c, half)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Reserve(ctx, c, half); !errors.Is(err, store.ErrJournalFull) {
		t.Fatalf("a second half while the first is held: %v; want ErrJournalFull", err)
	}
	p.Release()
	p, err = tr.Reserve(ctx, c, half)
	if err != nil {
		t.Fatalf("after Release: %v; want the room back", err)
	}
	p.Event(ctx, store.AuditFetch, map[string]any{"bad": func() {}}) // cannot be encoded: logged
	if !strings.Contains(log.String(), "audit record not written") {
		t.Fatalf("an unencodable record was not logged: %s", log.String())
	}
	p, err = tr.Reserve(ctx, c, half)
	if err != nil {
		t.Fatalf("after an Event that could not write: %v; want the room back", err)
	}
	p.Event(ctx, store.AuditFetch, map[string]any{"host": "api.example.com"})
	if _, err = tr.Reserve(ctx, c, half); err != nil {
		t.Fatalf("after an Event: %v; want the room back", err)
	}
	if got := records(t, st, store.AuditFetch); len(got) != 1 || got[0]["host"] != "api.example.com" {
		t.Fatalf("fetch records: %v; want the one Event wrote", got)
	}
}

// TestRefusalReason: the tool is told why its request's record could not
// be taken, in general terms, never the journal's path.
func TestRefusalReason(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("audit journal /var/lib/maiden/j: %w: 70000 bytes", store.ErrJournalFull): "its journal's backlog is past its bound",
		store.ErrJournalClosed:            "its journal is closed",
		errors.New("disk /dev/sda1 gone"): "it cannot be written",
	} {
		got := RefusalReason("fetch", err)
		if !strings.Contains(got, want) || !strings.Contains(got, "this fetch's record") || strings.Contains(got, "/") {
			t.Errorf("RefusalReason(%v) = %q; want it to say %q, naming no path", err, got, want)
		}
	}
}

// TestFetchRecords: Fetch sends nothing whose room in the journal it
// could not take (denied, RefusalReason); records each request it sent
// (method, the checked host, the path without its query, the credential's
// name, the cards' decisions, allowed or not and the status or the error's
// kind); and gives back the room of a fetch that panicked.
func TestFetchRecords(t *testing.T) {
	const bound = 64 << 10
	st := openStore(t, bound)
	tr := trailOf(st, nil)
	c := Call{Agent: "a", Tool: "t"}
	reserve := func(ctx context.Context, req sandbox.FetchRequest) (*Pending, error) {
		return tr.Reserve(ctx, c, FetchRecordSize(req.URL, req.Credential))
	}
	var bodies []map[string]any
	record := func(p *Pending, body map[string]any) {
		bodies = append(bodies, body)
		p.Event(context.Background(), store.AuditFetch, body)
	}
	decided := []api.Decision{{Allow: true, Card: "card_1", Target: "network:connect api.example.com"}}
	decisions := func(ctx context.Context) (context.Context, func() []api.Decision) {
		return ctx, func() []api.Decision { return decided }
	}
	var sent []string
	answer := map[string]*sandbox.FetchError{"/denied": {Kind: sandbox.FetchDenied, Message: "no"}, "/failed": {Kind: sandbox.FetchFailed, Message: "reset"}}
	fetch := Fetch(func(_ context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		sent = append(sent, req.URL)
		if strings.Contains(req.URL, "/panic") {
			panic("the fetch panicked")
		}
		for p, ferr := range answer {
			if strings.Contains(req.URL, p) {
				return nil, ferr
			}
		}
		return &sandbox.FetchResponse{Status: 201}, nil
	}, decisions, reserve, record)

	ctx := context.Background()
	if _, ferr := fetch(ctx, sandbox.FetchRequest{Method: "POST", URL: "https://API.Example.com:443/p/a?key=s3cret#frag", Credential: "GH"}); ferr != nil {
		t.Fatal(ferr)
	}
	fetch(ctx, sandbox.FetchRequest{Method: "GET", URL: "https://api.example.com/denied"})
	fetch(ctx, sandbox.FetchRequest{Method: "GET", URL: "https://api.example.com/failed"})
	want := []map[string]any{
		{"method": "POST", "credential": "GH", "host": "api.example.com", "path": "/p/a", "allowed": true, "status": 201, "decisions": decided},
		{"method": "GET", "credential": "", "host": "api.example.com", "path": "/denied", "allowed": false, "error": "denied", "decisions": decided},
		{"method": "GET", "credential": "", "host": "api.example.com", "path": "/failed", "allowed": true, "error": "failed", "decisions": decided},
	}
	if !reflect.DeepEqual(bodies, want) {
		t.Fatalf("fetch records:\n got %v\nwant %v", bodies, want)
	}
	if b, _ := json.Marshal(bodies); bytes.Contains(b, []byte("s3cret")) {
		t.Fatalf("a fetch record holds the query: %s", b)
	}

	// A fetch that panicked gives its room back.
	func() {
		defer func() { _ = recover() }()
		fetch(ctx, sandbox.FetchRequest{Method: "GET", URL: "https://api.example.com/panic"})
	}()
	if p, err := tr.Reserve(ctx, c, bound-8<<10); err != nil {
		t.Fatalf("after a fetch that panicked: %v; want its room given back", err)
	} else {
		p.Release()
	}

	// With the journal's room taken, the next request is not sent.
	p, err := tr.Reserve(ctx, c, bound-2<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	sent = nil
	_, ferr := fetch(ctx, sandbox.FetchRequest{Method: "GET", URL: "https://api.example.com/more"})
	if ferr == nil || ferr.Kind != sandbox.FetchDenied || !strings.Contains(ferr.Message, "its journal's backlog is past its bound") || len(sent) != 0 {
		t.Fatalf("a fetch the journal has no room for: %+v, sent %v; want denied naming the backlog, nothing sent", ferr, sent)
	}
}

// TestTunnelAndRequestBodies: a CONNECT's record brackets an IPv6 literal
// only (a redacted host holds a ':' too), keeps a refusal's reason and the
// cards' decisions; web_fetch's record names its default method and the
// secrets it put in headers.
func TestTunnelAndRequestBodies(t *testing.T) {
	ds := []api.Decision{{Allow: true, Card: "card_1"}}
	for _, tc := range []struct {
		tun  egress.Tunnel
		want map[string]any
	}{
		{egress.Tunnel{Host: "[REDACTED:TOKEN].example.net", Port: 443, Allowed: true, Rule: "http_allow[0]"},
			map[string]any{"method": "CONNECT", "host": "[REDACTED:TOKEN].example.net:443", "allowed": true, "rule": "http_allow[0]", "decisions": ds}},
		{egress.Tunnel{Host: "2001:db8::1", Port: 443, Rule: "private-address", Reason: "a private address"},
			map[string]any{"method": "CONNECT", "host": "[2001:db8::1]:443", "allowed": false, "rule": "private-address", "reason": "a private address", "decisions": ds}},
		{egress.Tunnel{Host: "10.0.0.1", Port: 8080, Rule: "private-address", Reason: "a private address"},
			map[string]any{"method": "CONNECT", "host": "10.0.0.1:8080", "allowed": false, "rule": "private-address", "reason": "a private address", "decisions": ds}},
	} {
		if got := TunnelBody(tc.tun, ds); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("TunnelBody(%+v):\n got %v\nwant %v", tc.tun, got, tc.want)
		}
	}
	got := RequestBody(egress.Request{URL: "https://api.example.com/x?q=1", HeaderSecrets: []string{"API_KEY"}}, nil, &egress.Response{Status: 200}, nil)
	want := map[string]any{"method": "GET", "credential": "", "host": "api.example.com", "path": "/x", "allowed": true, "status": 200, "header_secrets": []string{"API_KEY"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RequestBody:\n got %v\nwant %v", got, want)
	}
}

// TestBudgetAndSmallCountsRecorded: the budgets a call spent and an
// outcome's smallest counts (1 ms, 1 byte) are in its record.
func TestBudgetAndSmallCountsRecorded(t *testing.T) {
	rec := callRecord{Rendered: "--x=1", Budget: "card_1: reserved 1, 4 left", DurationMS: 1, OutputBytes: 1, ToolKind: "wasm"}
	b, err := rec.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got callRecord
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rec) {
		t.Fatalf("record %s decodes to %+v; want %+v", b, got, rec)
	}
}
