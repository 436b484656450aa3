package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestStaleRetryOfAnotherComponentIsDecidedAgain (issue 25): the cards
// allowed the call for the component it opened; that version turned stale
// as it started and the retry opened another component (digest 00…0) at
// the same path. With a grant naming the first component, the call is
// decided again for the one that would run and refused, naming both, and
// the replacement never runs; with a grant naming no component the retry
// runs the replacement as before.
func TestStaleRetryOfAnotherComponentIsDecidedAgain(t *testing.T) {
	path := testkit.Component(t, "logger")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	opened := "sha256:" + hex.EncodeToString(sum[:])
	replacement := "sha256:" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		name, grant string
		runs        int32
	}{
		{"pinned", "tool:invoke t@" + opened + " --...", 0},
		{"unpinned", "tool:invoke t --...", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			body := fmt.Sprintf("version = 1\n[tools.t]\npath = %q\n[agents.a]\ntools = [\"t\"]\ngrants = [%q]\n", path, tc.grant)
			h, _ := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
			defer h.Close(context.Background())
			r := &staleRunner{Runner: h.runner}
			r.swap.Store(true)
			h.useRunner(r)
			res, err := h.Call(context.Background(), Call{Agent: "a", Tool: "t", Input: `{}`})
			if err != nil {
				t.Fatal(err)
			}
			if r.opens.Load() < 2 {
				t.Fatalf("the stale version was not reopened (%d opens): the test did not reach the retry", r.opens.Load())
			}
			if n := r.runs.Load(); n != tc.runs {
				t.Fatalf("the replacement ran %d times, want %d: %+v %+v", n, tc.runs, res, res.Error)
			}
			if tc.runs == 1 {
				if !res.OK {
					t.Fatalf("result %+v %+v", res, res.Error)
				}
				return
			}
			if res.Error == nil || res.Error.Kind != KindDenied || !strings.Contains(res.Error.Message, "the tool's component is "+replacement+", not "+opened) {
				t.Fatalf("result %+v %+v, want denied naming both components", res, res.Error)
			}
		})
	}
}

// TestStaleRetryOfAnotherComponentIsAdmittedAgain (security review of the
// audit trail): as above, unpinned, the retry runs the replacement, which
// the cards were asked about again. The trail's call-admitted record is
// written before the run and names the component and the cards' decision
// the call was admitted with: the one written for the version that turned
// stale (and never started) named that version, and the replacement ran
// with no call-admitted record naming it or the decision that let it run
// (the what-if replay, reading call-admitted records, asked about a
// component that did not run). The replacement's run has its own.
func TestStaleRetryOfAnotherComponentIsAdmittedAgain(t *testing.T) {
	path := testkit.Component(t, "logger")
	replacement := "sha256:" + strings.Repeat("0", 64)
	dir := t.TempDir()
	body := fmt.Sprintf("version = 1\n[tools.t]\npath = %q\n[agents.a]\ntools = [\"t\"]\ngrants = [%q]\n", path, "tool:invoke t --...")
	h, _ := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t)})
	defer h.Close(context.Background())
	r := &staleRunner{Runner: h.runner}
	r.swap.Store(true)
	h.useRunner(r)
	res, err := h.Call(context.Background(), Call{Agent: "a", Tool: "t", Input: `{}`})
	if err != nil || !res.OK || r.runs.Load() != 1 {
		t.Fatalf("the replacement did not run once: %d runs, %+v %v", r.runs.Load(), res.Error, err)
	}
	st, _, err := h.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Journal().Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs, err := st.AuditTail(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The last call-admitted record before the outcome is the run's.
	var admitted, outcome *store.AuditRecord
	for i := range recs {
		switch recs[i].Kind {
		case store.AuditCallAdmitted:
			admitted = &recs[i]
		case AuditCallSucceeded:
			outcome = &recs[i]
		}
	}
	if admitted == nil || outcome == nil || admitted.Seq > outcome.Seq {
		t.Fatalf("no call-admitted record before the outcome: %+v", recs)
	}
	var rec struct {
		Component string        `json:"component"`
		Decision  *api.Decision `json:"decision"`
	}
	if err := json.Unmarshal(admitted.Body, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Component != replacement || rec.Decision == nil || rec.Decision.Component != replacement {
		t.Fatalf("the call-admitted record of the run names component %q (decision %+v), want the one that ran, %s: %s", rec.Component, rec.Decision, replacement, admitted.Body)
	}
}
