package maiden_test

import (
	"context"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/store"
)

// TestRecordedHostCallsBounded (the fourth review): a tool that asks
// http-fetch for a refused destination in a loop until its deadline (a
// refusal costs it microseconds, each an audit record of a declared
// agent's call) wrote records faster than the journal ingests them, until
// Append refused every audited call of every agent. One call's requests
// and reveals are bounded (1,024): past that they are refused unsent and
// unrecorded. In process and in workers.
func TestRecordedHostCallsBounded(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			t.Parallel()
			h := newHostWith(t, `version = 1
[tools.fetchloop]
path = %q
timeout_ms = 3000
http_allow = ["api.example.com"]

[agents.looper]
tools = ["fetchloop"]
grants = ["tool:invoke fetchloop --..."]
`, maiden.Options{Isolation: iso.iso}, "fetchloop")
			ctx := context.Background()
			res, err := h.Call(ctx, maiden.Call{Agent: "looper", Tool: "fetchloop", Input: `{"u":"https://denied.example/"}`})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.Error.Kind != maiden.KindDeadline {
				t.Fatalf("%+v, want the deadline", res.Error)
			}
			recs, err := h.AuditTail(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			fetches := 0
			for _, r := range recs {
				if r.Kind == store.AuditFetch {
					fetches++
				}
			}
			t.Logf("%d fetch records of %d in all", fetches, len(recs))
			if fetches == 0 || fetches > 1024 {
				t.Errorf("%d fetch records for one call, want 1 to 1024", fetches)
			}
		})
	}
}
