package callaudit

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/store"
)

// TestAppendRecordBuffers: records written one after another through the
// journal (AppendRecord encodes each into a buffer the next one uses
// again) each reach the chain with their own body, long after short and
// short after long.
func TestAppendRecordBuffers(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tr := &Trail{State: func(context.Context, *config.Config) (store.Store, error) { return st, nil }}
	want := []string{strings.Repeat("long ", 400), "short", strings.Repeat("x", 3000), "", "mid " + strings.Repeat("y", 100)}
	for _, r := range want {
		if err := AppendRecord(ctx, tr, Call{Agent: "a", Tool: "t"}, KindCallSucceeded, &callRecord{Rendered: r, DurationMS: int64(len(r))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := Flush(ctx, st); err != nil {
		t.Fatal(err)
	}
	recs, err := st.AuditTail(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Kind != KindCallSucceeded {
			continue
		}
		var rec callRecord
		if err := json.Unmarshal(r.Body, &rec); err != nil {
			t.Fatalf("record %d: %v: %s", r.Seq, err, r.Body)
		}
		if rec.DurationMS != int64(len(rec.Rendered)) {
			t.Fatalf("record %d mixes two records: %s", r.Seq, r.Body)
		}
		got = append(got, rec.Rendered)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("renderings in the chain = %q, want %q", got, want)
	}
}
