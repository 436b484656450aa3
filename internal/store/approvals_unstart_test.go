package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestUnstart: an approval consumed for a call that then never ran is
// given back by the process that consumed it (approved again, consumable
// exactly once more); another store (another process's runner) cannot
// give it back, nor can a done call be.
func TestUnstart(t *testing.T) {
	t.Parallel()
	eachBackend(t, testUnstart)
}

func testUnstart(t *testing.T, be backend) {
	ctx := context.Background()
	path := be.target(t)
	s := open(t, path, nil)
	s2 := open(t, path, nil)
	a := newApproval(t, s, "unstart", time.Hour)
	if _, err := s.Decide(ctx, a.ID, true, "operator:ann", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeAndStart(ctx, a.ID, Binding{}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Unstart(ctx, a.ID); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("another runner gave back the started call: %v", err)
	}
	wantState(t, s, a.ID, ApprovalStarted)
	if err := s.Unstart(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	wantState(t, s, a.ID, ApprovalApproved)
	if err := s.Unstart(ctx, a.ID); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("an approved request given back again: %v", err)
	}
	if _, err := s2.ConsumeAndStart(ctx, a.ID, Binding{}); err != nil {
		t.Fatalf("the given-back approval is not consumable: %v", err)
	}
	if _, err := s.ConsumeAndStart(ctx, a.ID, Binding{}); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("consumed twice: %v", err)
	}
	if err := s2.MarkDone(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s2.Unstart(ctx, a.ID); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("a done call given back: %v", err)
	}
	wantState(t, s, a.ID, ApprovalDone)
}
