package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestAppendAuditRefusesWhatTheJournalRefuses: AppendAudit (the direct
// path: operators' and card operations' records) refuses a name that is
// not UTF-8 text without NUL, and a body that is not UTF-8, as the
// journal's Append does. It took them (seen by pass 33): PostgreSQL's
// text columns then fail the write, and on SQLite the record was stored
// and hashed with its bytes while an export writes U+FFFD for them, so
// the record as exported is not the one hashed and every later export
// failed VerifyExport. After the refusals the chain still exports and
// verifies.
func TestAppendAuditRefusesWhatTheJournalRefuses(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := openOpts(t, be.target(t), nil)
		if _, err := s.AppendAudit(ctx, AuditRecord{Kind: "x", Actor: "operator:a", Body: json.RawMessage(`{"ok":true}`)}); err != nil {
			t.Fatal(err)
		}
		for _, r := range []AuditRecord{
			{Kind: "x", Actor: "operator:\xff"}, {Kind: "x", Agent: "a\xfe"}, {Kind: "x", Tool: "t\x00"},
			{Kind: "x", Actor: "agent:\x00"}, {Kind: "x", Body: json.RawMessage("{\"a\":\"\xff\"}")},
		} {
			if _, err := s.AppendAudit(ctx, r); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "not UTF-8") {
				t.Errorf("AppendAudit(kind %q actor %q agent %q tool %q body %q) = %v; want ErrBadInput, not UTF-8", r.Kind, r.Actor, r.Agent, r.Tool, r.Body, err)
			}
		}
		var buf bytes.Buffer
		n, head, err := s.ExportAudit(ctx, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if vn, vhead, err := VerifyExport(&buf, head); err != nil || vn != n || vhead != head {
			t.Fatalf("the export after the refusals: %d records, %v; want %d verified to %s", vn, err, n, head)
		}
	})
}
