package admin

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/statetest"
	"github.com/maiden-run/maiden/internal/store"
)

// TestLastAuditSeqOfAHugeSeq (pass 50's defect): whoever can write the audit table
// writes one row numbered above 2^62; lastAuditSeq's doubling search then
// overflows (hi*2 wraps to -2^63, then to 0) and spins at lo = hi = 0 for
// ever, so LastAuditSeq and every export (ExportAuditStream, maiden audit
// export) hang instead of answering or reporting the chain broken. A
// deadline on the context is the only way out here.
func TestLastAuditSeqOfAHugeSeq(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	statetest.AppendAudit(t, path, api.AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "echo", Body: json.RawMessage(`{"rendered":""}`)})
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	const huge = math.MaxInt64 - 1
	if _, err := db.Exec(`UPDATE audit SET seq = ? WHERE seq = 1`, int64(huge)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := OpenStore(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := s.LastAuditSeq(ctx)
	if err != nil || got != huge {
		t.Errorf("LastAuditSeq of a trail whose one row is numbered %d: %d, %v; want %d (found, not a search that never ends)", int64(huge), got, err, int64(huge))
	}
}

// TestOCSFApprovalRequestIsNotAnApproval (pass 50's defect): the approve layer
// records an agent's call asking for a human's approval as a record of
// kind "approval" ({"event":"requested",...}, internal/pipeline/
// middleware_approve.go:147). The OCSF export maps every "approval"
// record as a human's approval that succeeded (status Success), so a SIEM
// sees each request an agent makes (actor agent:NAME) as approved,
// though nobody has decided it, and cannot tell it from the human's
// decision but by the unmapped body.
func TestOCSFApprovalRequestIsNotAnApproval(t *testing.T) {
	body, _ := json.Marshal(map[string]any{"event": "requested", "approval": "apr_1", "rule": "middleware[1]", "reason": "asks a human",
		"rendered": "--to=mallory", "expires": time.Now().Add(time.Hour), "tool_digest": "", "policy": json.RawMessage(`{}`)})
	r := api.AuditRecord{Seq: 1, At: time.Now(), Kind: store.AuditApproval, Actor: "agent:a", Agent: "a", Tool: "pay", Body: body}
	b, err := OCSFEvent(r)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		StatusID     int    `json:"status_id"`
		Status       string `json:"status"`
		ActivityName string `json:"activity_name"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if e.StatusID != 99 || e.Status != "Pending" || e.ActivityName != "approval requested" {
		t.Errorf("the OCSF event of an approval request nobody has decided: status_id %d %q, activity %q; want 99 \"Pending\", \"approval requested\" (not reported as a success, an approval)", e.StatusID, e.Status, e.ActivityName)
	}
	// A human's approval of it is still a success.
	decided, _ := json.Marshal(map[string]any{"approval": "apr_1", "digest": "d", "rendered": "--to=mallory", "reason": "ok", "asked_by": "middleware[1]"})
	b, err = OCSFEvent(api.AuditRecord{Seq: 2, At: time.Now(), Kind: store.AuditApproval, Actor: "operator:ann", Agent: "a", Tool: "pay", Body: decided})
	if err != nil {
		t.Fatal(err)
	}
	e.StatusID, e.Status = 0, ""
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if e.StatusID != 1 || e.Status != "Success" {
		t.Errorf("the OCSF event of a human's approval: status_id %d %q; want 1 \"Success\"", e.StatusID, e.Status)
	}
}
