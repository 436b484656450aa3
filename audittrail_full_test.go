package maiden_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// fillJournal appends filler records to j until its backlog is within
// 2 KiB under bound: a call's call-admitted record still fits (the bound
// refuses an append once the backlog is past it), the room of a fetch's
// record (4 KiB and more, callaudit.FetchRecordSize) does not.
func fillJournal(t *testing.T, j *store.Journal, bound int64) {
	t.Helper()
	target := bound - 2<<10
	for i := 0; ; i++ {
		backlog := j.Stats().Backlog
		if backlog >= target {
			if backlog > bound {
				t.Fatalf("filled the journal's backlog to %d bytes, past its bound %d", backlog, bound)
			}
			return
		}
		pad := min(max(target-backlog-400, 0), 60<<10)
		body := `{"pad":"` + strings.Repeat("x", int(pad)) + `"}`
		if err := j.Append(store.AuditRecord{Kind: "test-filler", Actor: "operator", Body: []byte(body)}); err != nil {
			t.Fatalf("filler record %d (backlog %d of %d): %v", i, backlog, bound, err)
		}
	}
}

// auditKinds counts the trail's records by kind.
func auditKinds(t *testing.T, h *maiden.Host) map[string]int {
	t.Helper()
	recs, err := h.AuditTail(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, r := range recs {
		n[r.Kind]++
	}
	return n
}

// TestFetchRefusedWhenAuditTrailFull: an http-fetch's record is written
// after its request has gone out, so its room in the audit journal is
// taken before the request is sent (callaudit.Trail.Reserve). With the
// journal's backlog at its bound (ingestion held), the call is admitted
// (its call-admitted record fits) but its fetch is refused before a byte
// reaches the server (a real TLS server on loopback, which counts the
// requests it gets), and the tool sees why; the trail then has the call's
// admission and outcome and no fetch record, and no request that has no
// record. Once the backlog is ingested, the same fetch goes through.
func TestFetchRefusedWhenAuditTrailFull(t *testing.T) {
	t.Parallel()
	w := newCardsWorld(t)
	h := w.host(t, `
[agents.apionly]
tools = ["fetcher"]
grants = ["tool:invoke fetcher --...", "network:connect api.example.com"]
`)
	const bound = 1 << 20
	h.HoldAuditJournal(bound)
	ctx := context.Background()

	if res := w.fetch(t, h, "apionly", "", "api.example.com", "/", ""); !res.OK {
		t.Fatalf("fetch with room in the journal: %+v", res)
	}
	if n := w.hits.get("api.example.com"); n != 1 {
		t.Fatalf("the server got %d requests, want 1", n)
	}
	j, err := h.AuditJournal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fillJournal(t, j, bound)

	res := w.fetch(t, h, "apionly", "", "api.example.com", "/", "")
	if !denied(res, "the audit trail cannot take this fetch's record", "backlog is past its bound", "it was not sent") {
		t.Errorf("fetch with the journal's backlog at its bound: %+v; want it refused because its record cannot be written", res)
	} else {
		t.Logf("refused: %s", res.Error.Message)
	}
	if n := w.hits.get("api.example.com"); n != 1 {
		t.Fatalf("the server got %d requests, want 1: a fetch whose audit record could not be written reached it", n)
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	kinds := auditKinds(t, h)
	if kinds[store.AuditFetch] != 1 || kinds[store.AuditCallAdmitted] != 2 || kinds[store.AuditCallFailed] != 1 {
		t.Errorf("the trail's records by kind: %v; want 1 fetch (the first call's), 2 call-admitted, 1 call-failed", kinds)
	}

	// Ingested, the backlog is gone: the fetch goes through again, and
	// is recorded.
	if res := w.fetch(t, h, "apionly", "", "api.example.com", "/", ""); !res.OK {
		t.Fatalf("fetch after the journal was ingested: %+v", res)
	}
	if n := w.hits.get("api.example.com"); n != 2 {
		t.Fatalf("the server got %d requests, want 2", n)
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := auditKinds(t, h)[store.AuditFetch]; n != 2 {
		t.Errorf("%d fetch records, want 2", n)
	}
}

// TestWebFetchRefusedWhenAuditTrailFull: web_fetch's requests take their
// record's room before they are sent, as http-fetch's do: with the
// journal's backlog at its bound, the request is refused before it
// reaches the server (a real TLS server on loopback, counting requests),
// with the reason.
func TestWebFetchRefusedWhenAuditTrailFull(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }), "api.example.com")
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	h := newHostWith(t, `version = 1
[agents.a]
grants = ["tool:invoke web_fetch --...", "network:connect api.example.com"]
[agents.a.boundary]
network = true
[agents.a.tools.web_fetch]
http_allow = ["api.example.com"]
http_ports = [`+port+`]
http_allow_cidrs = ["127.0.0.0/8"]
http_ca_files = ["`+ca+`"]
`, maiden.Options{Isolation: maiden.InProcess, Resolver: testkit.Loopback("api.example.com")})
	const bound = 1 << 20
	h.HoldAuditJournal(bound)
	ctx := context.Background()
	call := maiden.Call{Agent: "a", Tool: "web_fetch", Input: `{"url":"https://api.example.com:` + port + `/x"}`}
	if res, err := h.Call(ctx, call); err != nil || !res.OK || hits.Load() != 1 {
		t.Fatalf("web_fetch with room in the journal: %v %+v (hits %d)", err, res, hits.Load())
	}
	j, err := h.AuditJournal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fillJournal(t, j, bound)
	res, err := h.Call(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	said := res.Output
	if res.Error != nil {
		said += res.Error.Message
	}
	if !strings.Contains(said, "the audit trail cannot take this fetch's record") || !strings.Contains(said, "backlog is past its bound") {
		t.Errorf("web_fetch with the journal's backlog at its bound: %+v; want it refused because its record cannot be written", res)
	} else {
		t.Logf("refused: %s", said)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the server got %d requests, want 1: a request whose audit record could not be written reached it", n)
	}
}

// TestTunnelRefusedWhenAuditTrailFull: a wrapped CLI's CONNECT takes its
// record's room before maiden's proxy dials: with the journal's backlog
// at its bound the proxy refuses the CONNECT (rule audit-trail) and the
// server (a real TLS server on loopback, counting requests) gets nothing;
// the call says why.
func TestTunnelRefusedWhenAuditTrailFull(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv, ca := testkit.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "through the tunnel")
	}), "api.example.com")
	u, _ := url.Parse(srv.URL)
	h := newHostWith(t, `version = 1
[tools.echo]
path = %q
`+curlCLI(ca, u.Port(), "api.example.com")+`
[agents.cli]
tools = ["curl"]
grants = ["tool:invoke curl --... -- ...", "network:connect api.example.com"]
`, maiden.Options{Isolation: maiden.InProcess, Resolver: testkit.Loopback("api.example.com")}, "echo")
	const bound = 1 << 20
	h.HoldAuditJournal(bound)
	ctx := context.Background()
	get := func() maiden.Result {
		t.Helper()
		in := `{"cacert":"` + ca + `","silent":true,"show-error":true,"url":"https://api.example.com:` + u.Port() + `/"}`
		res, err := h.Call(ctx, maiden.Call{Agent: "cli", Tool: "curl", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := get(); !res.OK || res.Output != "through the tunnel" || hits.Load() != 1 {
		t.Fatalf("with room in the journal: %+v %+v (hits %d)", res, res.Error, hits.Load())
	}
	j, err := h.AuditJournal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fillJournal(t, j, bound)
	res := get()
	if !denied(res, "its CONNECT was refused", "the audit trail cannot take this tunnel's record", "backlog is past its bound") {
		t.Errorf("a CONNECT with the journal's backlog at its bound: %+v %+v; want it refused because its record cannot be written", res, res.Error)
	} else {
		t.Logf("refused: %s", res.Error.Message)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the server got %d requests, want 1: a tunnel whose audit record could not be written reached it", n)
	}
}
