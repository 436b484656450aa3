package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestHostAndDecideAgree: the decision a call's audit record carries is
// the one internal/decide gives over the same wallet for the call the
// record describes (its tool and rendering, read back), for calls the
// cards allow and calls each kind of bound refuses (CARDS.md A2, A4, A10,
// A12). This is what a replay of the trail (issue 24) relies on: the Host
// decides through the pure function and records what it returned.
func TestHostAndDecideAgree(t *testing.T) {
	dir := t.TempDir()
	body := fmt.Sprintf(`version = 1
[tools.echo]
path = %q
[agents.a]
tools = ["echo"]
`, testkit.Component(t, "echo"))
	h, cfg := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: testkit.CompileCache(t), StatePath: filepath.Join(dir, "state.db")})
	defer h.Close(context.Background())
	ctx := context.Background()
	st, err := h.state(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	grants := func(ss ...string) []cards.Grant {
		var gs []grant.Grant
		for _, s := range ss {
			g, err := grant.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			gs = append(gs, g)
		}
		return cards.Any(gs...)
	}
	allow, err := st.Grant(ctx, "a", cards.Spec{LowerPos: grants("tool:invoke echo --message=hi*"), LowerNeg: grants("tool:invoke echo --message=hidden")})
	if err != nil {
		t.Fatal(err)
	}
	forbid, err := st.Grant(ctx, "a", cards.Spec{UpperNeg: grants("tool:invoke echo --message=*forbidden*")})
	if err != nil {
		t.Fatal(err)
	}

	calls := []struct {
		message string
		allow   bool
		card    string
		bound   string
	}{
		{"hi there", true, allow.ID, api.DecisionLowerPositive},             // A10 (extension: a glob)
		{"hidden", false, allow.ID, api.DecisionLowerNegative},              // A2
		{"hi forbidden fruit", false, forbid.ID, api.DecisionUpperNegative}, // A4
		{"bye", false, "", ""}, // A12: bound, no card allows it
		{`hi "quoted" \ and a line` + "\nbreak", true, allow.ID, "lower-positive"}, // a rendering with escapes reads back
	}
	for _, c := range calls {
		in, _ := json.Marshal(map[string]string{"message": c.message})
		res, err := h.Call(ctx, Call{Agent: "a", Tool: "echo", Input: string(in)})
		if err != nil {
			t.Fatal(err)
		}
		if c.allow != (res.Error == nil) {
			t.Fatalf("%q: allowed %v, want %v (%+v)", c.message, res.Error == nil, c.allow, res.Error)
		}
	}

	recs, err := auditTail(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	echoBytes, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	echoSum := sha256.Sum256(echoBytes)
	echoDigest := "sha256:" + hex.EncodeToString(echoSum[:])
	w, err := h.wallet(ctx, cfg, "a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, r := range recs {
		if r.Kind != store.AuditCallAdmitted && r.Kind != store.AuditCallRefused {
			continue
		}
		if i >= len(calls) {
			t.Fatalf("more call records than calls: %s", r.Body)
		}
		c := calls[i]
		i++
		var rec callRecord
		if err := json.Unmarshal(r.Body, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Decision == nil {
			t.Fatalf("%q: the record carries no decision: %s", c.message, r.Body)
		}
		// The replay: the call read back from its record, decided on the
		// same wallet by the pure function.
		rc, err := grant.ParseRendering(rec.Rendered)
		if err != nil {
			t.Fatalf("%q: rendering %q does not read back: %v", c.message, rec.Rendered, err)
		}
		// The question carries the component the call ran (issue 25):
		// echo's file, as the record's decision names it.
		if rec.Decision.Component != echoDigest {
			t.Errorf("%q: the decision's component is %q, want echo's %q", c.message, rec.Decision.Component, echoDigest)
		}
		tg := grant.CommandTarget(r.Tool, rc.Command, rc.Args, rc.Positionals)
		tg.Component = rec.Decision.Component
		d := decide.Decide(decide.Basis{Wallet: w}, decide.Invoke(tg))
		want := d.API()
		if want.Allow {
			want.Rule, want.Target = "", "" // the record's own card, bound, grant, tool and rendering
		}
		if diff := cmp.Diff(want, *rec.Decision); diff != "" {
			t.Errorf("%q: recorded decision differs from Decide's (-decide +recorded):\n%s", c.message, diff)
		}
		if rec.Decision.Allow != c.allow || rec.Decision.Card != c.card || rec.Decision.Bound != c.bound {
			t.Errorf("%q: recorded allow %v by card %q (%s), want %v by %q (%s)", c.message, rec.Decision.Allow, rec.Decision.Card, rec.Decision.Bound, c.allow, c.card, c.bound)
		}
		if c.allow && rec.Card != c.card {
			t.Errorf("%q: the record's card field is %q, want %q", c.message, rec.Card, c.card)
		}
		if !c.allow && rec.Message != d.Reason {
			t.Errorf("%q: the refusal says %q, Decide's reason is %q", c.message, rec.Message, d.Reason)
		}
	}
	if i != len(calls) {
		t.Fatalf("%d call records for %d calls", i, len(calls))
	}
}
