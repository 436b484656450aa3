package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the hostile review of the what-if's reading of the trail:
// what it holds in memory at once, and whether it answers from records
// that do not verify.

// pageStore is a store that notes the largest read of the trail a reader
// made: records and the bytes of their bodies.
type pageStore struct {
	store.Store
	maxRecords int
	maxBytes   int64
}

func (p *pageStore) note(recs []store.AuditRecord) {
	var n int64
	for _, r := range recs {
		n += int64(len(r.Body))
	}
	p.maxRecords, p.maxBytes = max(p.maxRecords, len(recs)), max(p.maxBytes, n)
}

func (p *pageStore) AuditTail(ctx context.Context, after int64, limit int) ([]store.AuditRecord, error) {
	recs, err := p.Store.AuditTail(ctx, after, limit)
	p.note(recs)
	return recs, err
}

func (p *pageStore) AuditPage(ctx context.Context, after int64, limit int, maxBytes int64) ([]store.AuditRecord, error) {
	recs, err := p.Store.AuditPage(ctx, after, limit, maxBytes)
	p.note(recs)
	return recs, err
}

// refuseLarge appends n records of agent's calls of pay refused for want
// of a card, each rendering an input of about size bytes (an agent's
// input up to max_input_bytes, as the call path records it whole), and
// returns a record's size.
func refuseLarge(t testing.TB, s *State, agent string, n, size int) int64 {
	t.Helper()
	memo := strings.Repeat("x", size)
	target := "tool:invoke pay --memo=" + memo
	body, _ := json.Marshal(map[string]any{"rendered": "--memo=" + memo,
		"decision": map[string]any{"allow": false, "rule": "no card", "reason": "no card allows the call", "target": target}})
	for range n {
		if err := s.st.Journal().Append(store.AuditRecord{At: time.Now(), Kind: store.AuditCallRefused, Actor: "agent:" + agent, Agent: agent, Tool: "pay", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.st.Journal().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return int64(len(body))
}

// TestWhatIfReadsTheTrailInBoundedPages: an agent's refused calls of the
// largest input it may send (1 MiB, the default max_input_bytes) are read
// by the what-if, and by the view of what a card would newly allow that
// an approval's inbox page shows inside the server, a bounded page at a
// time: at most AuditPageBytes of bodies and one record beyond. Before,
// a page was 2,000 records whatever their size: 2,000 such calls made one
// read of 2 GiB, in the server, when a human opened the agent's request.
// The answers are whole (every call counted).
func TestWhatIfReadsTheTrailInBoundedPages(t *testing.T) {
	ctx := context.Background()
	s := newlyStore(t)
	const calls, size = 6, 1 << 20
	rec := refuseLarge(t, s, "research", calls, size)
	ps := &pageStore{Store: s.st}
	s.st = ps
	since := time.Now().Add(-time.Hour)
	limit := AuditPageBytes + rec

	np, err := s.NewlyPossible(ctx, "research", []string{"tool:invoke pay --..."}, "", since)
	if err != nil || np.Calls != calls {
		t.Fatalf("NewlyPossible: %d calls, %v; want %d", np.Calls, err, calls)
	}
	if ps.maxBytes > limit {
		t.Fatalf("the view of what a card would newly allow read %d records, %d bytes, at once; want at most %d bytes", ps.maxRecords, ps.maxBytes, limit)
	}
	ps.maxRecords, ps.maxBytes = 0, 0
	rep, err := s.WhatIf(ctx, api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke pay --..."}}}, since)
	if err != nil || rep.Flips != calls {
		t.Fatalf("WhatIf: %d flips, %v; want %d", rep.Flips, err, calls)
	}
	if ps.maxBytes > limit {
		t.Fatalf("the what-if read %d records, %d bytes, at once; want at most %d bytes", ps.maxRecords, ps.maxBytes, limit)
	}
	// The export (maiden audit export, a SIEM's pull) pages the same way
	// and writes every record (OCSF is the same loop, another encoding).
	for _, f := range []string{ExportJSONL} {
		ps.maxRecords, ps.maxBytes = 0, 0
		h, err := s.ExportAuditStream(ctx, io.Discard, ExportOptions{Format: f})
		if err != nil || h.Records != calls {
			t.Fatalf("export %s: %d records, %v; want %d", f, h.Records, err, calls)
		}
		if ps.maxBytes > AuditPageBytes+rec {
			t.Fatalf("export %s read %d records, %d bytes, at once; want at most %d bytes", f, ps.maxRecords, ps.maxBytes, AuditPageBytes+rec)
		}
	}
}

// TestWhatIfRefusesATrailThatDoesNotVerify: a record of the window edited,
// deleted or inserted with the sqlite3 shell (a refused call taken out of
// the trail, or its rendering changed so that the proposed card no longer
// covers it) fails the what-if and the view of what a card would newly
// allow, naming the record, rather than answer from what was left; an
// intact trail answers.
func TestWhatIfRefusesATrailThatDoesNotVerify(t *testing.T) {
	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Fatal("the sqlite3 command-line shell is needed (Debian package sqlite3; make test installs it, see scripts/deps)")
	}
	ctx := context.Background()
	change := api.WhatIfChange{Grants: []api.WhatIfGrant{{Agent: "research", Grant: "tool:invoke pay --to=bob"}}}
	for _, tc := range []struct{ name, sql, want string }{
		{"intact", ``, ""},
		{"a refused call deleted", `DELETE FROM audit WHERE seq = 3`, "record 3 deleted"},
		{"a refused call's rendering edited", `UPDATE audit SET body = replace(body, 'bob', 'eve') WHERE seq = 2`, "record 2 edited"},
		{"the last refused call deleted and the rest renumbered", `DELETE FROM audit WHERE seq = 2; UPDATE audit SET seq = seq - 1 WHERE seq > 2`, "record 2 edited"},
		{"a record inserted", `UPDATE audit SET seq = seq + 100 WHERE seq >= 3; UPDATE audit SET seq = seq - 99 WHERE seq >= 103;
			INSERT INTO audit (seq, at, kind, actor, agent, tool, body, prev, hash)
			SELECT 3, at, kind, actor, agent, tool, body, hash, hash FROM audit WHERE seq = 2`, "record 3 edited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newlyStore(t)
			refusePay(t, s, "research", "bob", 4)
			if tc.sql != "" {
				path := s.st.(interface{ Path() string }).Path()
				// The open store may hold the file's lock a moment: the
				// shell waits for it rather than fail at once ("database
				// is locked", in full runs of the package).
				if out, err := exec.Command(sqlite, "-cmd", ".timeout 10000", path, tc.sql).CombinedOutput(); err != nil {
					t.Fatalf("sqlite3: %v: %s", err, out)
				}
			}
			since := time.Now().Add(-time.Hour)
			rep, err := s.WhatIf(ctx, change, since)
			np, nerr := s.NewlyPossible(ctx, "research", []string{"tool:invoke pay --to=bob"}, "", since)
			if tc.want == "" {
				if err != nil || rep.Flips != 4 || nerr != nil || np.Calls != 4 {
					t.Fatalf("intact: WhatIf %d flips, %v; NewlyPossible %d calls, %v; want 4 each", rep.Flips, err, np.Calls, nerr)
				}
				return
			}
			for what, e := range map[string]error{"WhatIf": err, "NewlyPossible": nerr} {
				if !errors.Is(e, ErrAuditBroken) || !strings.Contains(e.Error(), tc.want) {
					t.Errorf("%s after %q: %v (%d flips, %d calls newly allowed); want an error wrapping ErrAuditBroken naming %q", what, tc.sql, e, rep.Flips, np.Calls, tc.want)
				}
			}
		})
	}
}
