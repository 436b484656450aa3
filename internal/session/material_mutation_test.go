package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/boundary"
	hostfs "github.com/maiden-run/maiden/internal/builtin"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// Secret material, web_fetch and the built-ins' answers, written when
// planted bugs in them left the package's own suite green.

// TestMaterialOnlyWhileTheBoundaryHasNetwork: a session whose boundary
// has network off, or is not maiden's (external), resolves no material:
// the host is not asked for any secret and the session holds none, even
// when it held some before (BOUNDARIES.md: stripped when the boundary is
// downgraded).
func TestMaterialOnlyWhileTheBoundaryHasNetwork(t *testing.T) {
	t.Parallel()
	b := config.Binding{Tool: "web_fetch", Credential: "API_TOKEN"}
	var asked []string
	lookup := func(name string) (string, bool) { asked = append(asked, name); return "v-" + name, true }
	on := store.Session{ID: "s1", Boundary: boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Network: true}}
	for _, down := range []boundary.Boundary{
		{Kind: boundary.Managed, Filesystem: boundary.Restricted, Network: false},
		{Kind: boundary.External, Filesystem: boundary.Restricted, Network: true},
	} {
		var ms Materials
		if m, terr := ms.Resolve(on, b, lookup); terr != nil || m.Connection == nil || !ms.Held("s1") {
			t.Fatalf("network on: material %+v, refusal %v", m, terr)
		}
		asked = nil
		s := on
		s.Boundary = down
		m, terr := ms.Resolve(s, b, lookup)
		if terr != nil || m.Connection != nil || len(asked) != 0 || ms.Held("s1") {
			t.Errorf("boundary %s network=%v: material %+v, refusal %v, secrets asked %q, held %v; want no material, nothing asked, none held",
				down.Kind, down.Network, m, terr, asked, ms.Held("s1"))
		}
	}
}

// TestMaterialEmptySecretNotConfigured: a secret the host holds empty is
// not configured: credential_not_configured, nothing resolved.
func TestMaterialEmptySecretNotConfigured(t *testing.T) {
	t.Parallel()
	var ms Materials
	s := store.Session{ID: "s1", Boundary: boundary.Boundary{Kind: boundary.Managed, Network: true}}
	m, terr := ms.Resolve(s, config.Binding{Credential: "API_TOKEN"}, func(string) (string, bool) { return "", true })
	if m.Connection != nil || structuredReason(terr) != "credential_not_configured" {
		t.Errorf("an empty secret: material %+v, refusal %+v; want credential_not_configured", m, terr)
	}
}

// TestMaterialStaleAfterAnyDrop: a web_fetch that read its session before
// the session's material was dropped resolves nothing, whether the drop
// was the first Materials saw or a later one, and after so many other
// sessions were dropped that the record of this one was forgotten.
func TestMaterialStaleAfterAnyDrop(t *testing.T) {
	t.Parallel()
	s := store.Session{ID: "s1", Boundary: boundary.Boundary{Kind: boundary.Managed, Network: true}}
	b := config.Binding{Credential: "API_TOKEN"}
	lookup := func(name string) (string, bool) { return "v-" + name, true }
	stale := func(ms *Materials, mark uint64) bool {
		m, terr := ms.ResolveSince(mark, s, b, lookup)
		return m.Connection == nil && structuredReason(terr) == store.BoundaryReasonSessionEnded
	}

	var ms Materials
	ms.Drop("other") // not the first drop
	mark := ms.Mark()
	ms.Drop("s1")
	if !stale(&ms, mark) {
		t.Error("a web_fetch that read s1 before a later drop of s1 resolved its material")
	}

	var many Materials
	many.Drop("other")
	mark = many.Mark()
	many.Drop("s1")
	for i := range maxDropped {
		many.Drop(fmt.Sprintf("x%d", i)) // s1's drop is forgotten
	}
	if !stale(&many, mark) {
		t.Errorf("a web_fetch that read s1 before its drop, after %d more drops: material resolved", maxDropped)
	}
}

// TestWebFetchAskedTheCards: every web_fetch request goes through the
// gate with the agent's cards (the Authorizer Run is given): a refusal of
// theirs is the call's refusal (denied, fetch_denied, nothing sent), and
// the observer sees it as a refusal with its rule.
func TestWebFetchAskedTheCards(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(file, []byte(`version = 1
[agents.a]
grants = ["tool:invoke web_fetch --..."]
[agents.a.tools.web_fetch]
http_allow = ["api.example.com"]
http_allow_cidrs = ["127.0.0.0/8"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	obs := &fetchObserver{}
	w := WebFetch{
		Gate:      egress.New(&egress.Options{Resolver: testkit.Loopback("api.example.com")}),
		Materials: &Materials{},
		Observer:  obs,
	}
	var asked []string
	authz := func(host string, port int, _ string) error {
		asked = append(asked, fmt.Sprintf("%s:%d", host, port))
		return &egress.Refusal{Rule: "no-network-card", Reason: "no network:connect card for " + host}
	}
	s := store.Session{ID: "s1", Agent: "a", Boundary: boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Network: true}}
	_, terr := w.Run(context.Background(), cfg, "a", s, authz, []byte(`{"url":"https://api.example.com/"}`))
	var be hostfs.Error
	if terr == nil || terr.Kind != api.KindDenied || json.Unmarshal(terr.Structured, &be) != nil || be.Reason != hostfs.ReasonFetchDenied ||
		!strings.Contains(terr.Message, "no network:connect card") || len(asked) == 0 {
		t.Errorf("web_fetch the cards refuse: %+v (cards asked %q); want denied, fetch_denied, the cards' reason", terr, asked)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.events) != 1 || obs.events[0].Allowed || obs.events[0].Rule != "no-network-card" {
		t.Errorf("observer events %+v; want one refusal, rule no-network-card", obs.events)
	}
}

type fetchObserver struct {
	mu     sync.Mutex
	events []api.FetchEvent
}

func (o *fetchObserver) Admission(api.AdmissionEvent) {}
func (o *fetchObserver) CallDone(api.CallEvent)       {}
func (o *fetchObserver) Fetch(e api.FetchEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

// TestRequestBeyondMaxPending: an agent with maxPending boundary requests
// waiting is refused another (denied, naming max_pending), not reported as
// a failing store.
func TestRequestBeyondMaxPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := gateConfig(t)
	_, st := newGate(t)
	s, _, err := st.OpenSession(ctx, "s1", "a", Initial(cfg, "a"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if _, terr, err := Request(ctx, st, s, "r1", []byte(`{"network":{"enabled":true}}`), "fetch the docs", 1, log, errTestState); terr != nil || err != nil {
		t.Fatalf("the first request: %+v, %v", terr, err)
	}
	_, terr, err := Request(ctx, st, s, "r2", []byte(`{"filesystem":{"entries":[{"path":"/srv/other","access":"read","scope":"subtree"}]}}`), "read other", 1, log, errTestState)
	if err != nil || terr == nil || terr.Kind != api.KindDenied || !strings.Contains(terr.Message, "max_pending") {
		t.Errorf("a second request with max_pending 1: %+v, err %v; want denied naming max_pending", terr, err)
	}
}

// TestOutcomeAndFailureKinds: an operator's free-text reason stays out of
// the structured error's reason (^[a-z0-9_]+$; it is kept in the
// message), a request ID not of the pattern is not echoed as requestId,
// and a built-in's refusal to follow a symlink out is kind denied.
func TestOutcomeAndFailureKinds(t *testing.T) {
	t.Parallel()
	var e struct {
		Reason    string `json:"reason"`
		RequestID string `json:"requestId"`
		Status    string `json:"status"`
	}
	terr := Outcome("denied", "Not today, sorry", "r1", "bnd_1", "boundary request r1 was denied (Not today, sorry)")
	if err := json.Unmarshal(terr.Structured, &e); err != nil || e.Reason != boundary.ReasonDenied || e.RequestID != "r1" || e.Status != "denied" {
		t.Errorf("an operator's free-text reason: %s; want reason %s, requestId r1", terr.Structured, boundary.ReasonDenied)
	}
	e.RequestID = ""
	terr = Outcome("invalid", "invalid_path", "bad id!", "", "the request is not valid")
	if err := json.Unmarshal(terr.Structured, &e); err != nil || e.RequestID != "" || e.Reason != "invalid_path" {
		t.Errorf("an invalid request ID: %s; want no requestId", terr.Structured)
	}
	for _, reason := range []string{hostfs.ReasonSymlinkEscape, hostfs.ReasonSymlink, hostfs.ReasonFetchDenied, hostfs.ReasonNoCard} {
		if terr := Failure(&hostfs.Error{Reason: reason, Target: "/x"}); terr.Kind != api.KindDenied {
			t.Errorf("%s: kind %s, want denied", reason, terr.Kind)
		}
	}
	if terr := Failure(errors.New("disk on fire")); terr.Kind != api.KindTool {
		t.Errorf("another failure: kind %s, want tool", terr.Kind)
	}
}
