//go:build linux

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/internal/testkit/cpuclock"
	"github.com/maiden-run/maiden/internal/whatif/whatiftest/trailstore"
)

// BenchmarkAuditWhatIf100k is maiden audit whatif end to end, as an
// operator runs it, over a real SQLite state store holding 100,000
// records of internal/whatif's varied trail (trailstore.Store: written
// through the store's own API, the records through its audit journal):
//
//   - command: run's `audit whatif -state PATH` with no change (every
//     decision verified, exit 0): opening the store, reading the cards and
//     the week's records page by page, the replay, the report;
//   - command-revoke: the same with -revoke of a live card (decided twice
//     for the agents the change touches);
//   - read: the baseline in the same run, only what the command reads:
//     the store opened and every record read back, page by page, as
//     admin's replay reads them.
//
// Each reports cpu-ns/op besides ns/op: the process's CPU (user and
// system, the garbage collector's threads included), which on the shared
// VM says more than a wall time stretched by its load. bench/whatif-e2e
// times the built binary on such a store too.
func BenchmarkAuditWhatIf100k(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "maiden-state.db")
	info, err := trailstore.Store(ctx, path, 24, 40, 100_000)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("store: %+v", info)
	cmd := func(b *testing.B, want int, args ...string) {
		var out, errb bytes.Buffer
		defer cpuclock.Report(b, cpuclock.Now())
		for b.Loop() {
			out.Reset()
			errb.Reset()
			if code := run(ctx, append([]string{"audit", "whatif", "-state", path}, args...), strings.NewReader(""), &out, &errb); code != want {
				b.Fatalf("exit %d, want %d: %s%s", code, want, out.String(), errb.String())
			}
		}
		if !strings.Contains(out.String(), "replayed ") {
			b.Fatalf("no report: %s", out.String())
		}
	}
	b.Run("command", func(b *testing.B) { cmd(b, exitWhatIfSame) })
	b.Run("command-revoke", func(b *testing.B) { cmd(b, exitWhatIfFlips, "-revoke", info.Live) })
	b.Run("read", func(b *testing.B) {
		defer cpuclock.Report(b, cpuclock.Now())
		for b.Loop() {
			st, err := admin.OpenStore(ctx, path, nil)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for after := int64(0); ; {
				recs, err := st.AuditTail(ctx, after, 2000)
				if err != nil {
					b.Fatal(err)
				}
				n += len(recs)
				if len(recs) < 2000 {
					break
				}
				after = recs[len(recs)-1].Seq
			}
			st.Close()
			if n < info.Records {
				b.Fatalf("read %d records, want %d", n, info.Records)
			}
		}
	})
}
