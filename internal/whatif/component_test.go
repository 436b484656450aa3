package whatif_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/whatif"
)

// TestWhatIfComponent: a call's record carries the component it ran (its
// decision's component), and a replay asks the question with it, so a
// grant naming a digest flips only the calls of that component (issue
// 25). echo ran component A twice and B once, all refused (research holds
// no card for echo); wait ran A, allowed by a grant pinned to A.
func TestWhatIfComponent(t *testing.T) {
	cs := []cards.Card{card(t, "c_wait", "research", cards.Spec{LowerPos: gs(t, "tool:invoke wait@"+compA+" --...")})}
	tr := newTrail(t, cs, now.Add(-time.Minute))
	tr.CallOf("research", "echo", "--message=hi", compA)
	tr.CallOf("research", "echo", "--message=ho", compA)
	tr.CallOf("research", "echo", "--message=hi", compB)
	if !tr.CallOf("research", "wait", "--ms=1", compA) {
		t.Fatal("the grant pinned to A does not allow wait's call of A")
	}
	for _, tc := range []struct {
		name   string
		change api.WhatIfChange
		want   []flip
	}{
		{"a grant naming another digest flips nothing",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke echo@sha256:" + strings.Repeat("0", 64) + " --..."}}}, nil},
		{"a grant naming A flips A's calls only",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke echo@" + compA + " --..."}}},
			[]flip{{"research", "echo", 0, 2, []string{"tool:invoke echo --message=hi", "tool:invoke echo --message=ho"}}}},
		{"a grant naming no digest flips every component's",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke echo --..."}}},
			[]flip{{"research", "echo", 0, 3, []string{"tool:invoke echo --message=hi", "tool:invoke echo --message=ho", "tool:invoke echo --message=hi"}}}},
		{"a prohibition naming B does not touch wait's call of A",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke wait@" + compB + " --...", As: api.WhatIfDeny}}}, nil},
		{"a prohibition naming A does",
			api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke wait@" + compA + " --...", As: api.WhatIfDeny}}},
			[]flip{{"research", "wait", 1, 0, []string{"tool:invoke wait --ms=1"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := whatif.New(whatif.State{Now: now, Agents: []string{"research"}, Cards: cs}, tc.change)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range tr.Recs {
				r.Add(rec)
			}
			rep := r.Report()
			if diff := cmp.Diff(tc.want, flips(rep), cmp.AllowUnexported(flip{})); diff != "" {
				t.Errorf("flips (-want +got):\n%s", diff)
			}
			if rep.Replayed != 4 || rep.Verified != 4 || len(rep.Inexact) != 0 {
				t.Errorf("replayed %d, verified %d, inexact %v: want 4 replayed, all exact", rep.Replayed, rep.Verified, rep.Inexact)
			}
		})
	}
}

// TestWhatIfBadDigestGrant: a what-if grant with a malformed digest is a
// bad grant (maiden audit whatif exits 2), never a grant of any component.
func TestWhatIfBadDigestGrant(t *testing.T) {
	_, err := whatif.New(whatif.State{Now: now, Agents: []string{"research"}},
		api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke echo@sha256:abc --..."}}})
	if !errors.Is(err, whatif.ErrBadGrant) || !strings.Contains(err.Error(), "64 hex digits after sha256:") {
		t.Fatalf("err = %v, want ErrBadGrant", err)
	}
}

// TestBeyondNamesTheComponent: what a new card would newly allow says the
// digest its grant names, and says so when an unpinned grant widens what
// today's wallet allows only for one component.
func TestBeyondNamesTheComponent(t *testing.T) {
	st := whatif.State{Now: now, Cards: []cards.Card{card(t, "c_echo", "research", cards.Spec{LowerPos: gs(t, "tool:invoke echo@"+compA+" --message=hi")})}}
	for _, tc := range []struct {
		grant string
		want  string
	}{
		{"tool:invoke echo@" + compA + " --message=*", "tool:invoke echo@" + compA + " with any --message= (today only --message=hi)"},
		{"tool:invoke echo --message=hi", "tool:invoke echo with any component (today only " + compA + ")"},
		{"tool:invoke echo@" + compB + " --message=hi", "tool:invoke echo@" + compB + " with --message=hi (today nothing of echo; only while its component is the one named)"},
	} {
		g, err := grant.Parse(tc.grant)
		if err != nil {
			t.Fatal(err)
		}
		lines, red := whatif.Beyond(st, "research", []grant.Grant{g}, "")
		if red || len(lines) != 1 || lines[0] != tc.want {
			t.Errorf("Beyond(%q) = %q (redundant %v), want %q", tc.grant, lines, red, tc.want)
		}
	}
}
