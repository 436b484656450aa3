package store

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
)

// TestAuditGroupTextRefusedBeforeTheBatch: AppendAuditGroup refuses a
// record whose names or body are not UTF-8 text (checkAuditText) before
// it joins a batch, as it refuses one checkAuditRecord refuses: inside the
// batch's transaction (normalAudit) the refusal rolled back every other
// caller's record in that batch, so one caller's bad bytes refused
// others' calls (pass 36, after checkAuditText moved into normalAudit).
// Deterministic: the queue is held as a commit in flight would hold it
// while the two callers join, then handed over.
func TestAuditGroupTextRefusedBeforeTheBatch(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	g := &s.auditQ
	// A commit in flight (as another caller's would be): a caller that
	// joins the queue now waits behind it, to be committed in the next
	// batch with whoever joins after it.
	g.mu.Lock()
	g.flushing = true
	g.mu.Unlock()
	queued := func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue)
	}
	bad, good := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := s.AppendAuditGroup(ctx, AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:\x00", Agent: "a", Tool: "bad"})
		bad <- err
	}()
	// Refused at once (the fix), or queued for the batch (the defect).
	var badErr error
	joined := false
	for badErr == nil && !joined {
		select {
		case badErr = <-bad:
			if badErr == nil {
				t.Fatal("the record with a NUL in its actor: <nil>; want ErrBadInput")
			}
		default:
			joined = queued() == 1
			runtime.Gosched()
		}
	}
	go func() {
		_, err := s.AppendAuditGroup(ctx, AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "good"})
		good <- err
	}()
	want := 1
	if joined {
		want = 2
	}
	for queued() != want {
		runtime.Gosched()
	}
	g.mu.Lock()
	close(g.queue[0].lead) // the commit in flight is done: hand over
	g.mu.Unlock()
	if joined {
		badErr = <-bad
	}
	if !errors.Is(badErr, ErrBadInput) {
		t.Fatalf("the record with a NUL in its actor: %v; want ErrBadInput", badErr)
	}
	if err := <-good; err != nil {
		t.Fatalf("a good record batched with one whose actor holds a NUL: %v; want it committed (the bad one refused before it joined the batch)", err)
	}
}
