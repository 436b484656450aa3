package mcpserver

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/testkit"
)

// BenchmarkIdleSessions measures the heap an idle HTTP session holds (an
// initialize and nothing more: 20,000 of them held 350 MB before sessions
// expired) and what is left once they have expired: B/session is held
// while they live, retained-B/session after expiry.
func BenchmarkIdleSessions(b *testing.B) {
	path := filepath.Join(b.TempDir(), "agent.toml")
	writeAgentTOML(b, path, []toolLine{{"echo", "echo", ""}})
	cfg, err := config.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	s := New(h, nil)
	if _, err := s.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s.HTTPHandler(HTTPOptions{SessionIdle: time.Second}))
	defer srv.Close()
	heap := func() float64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc)
	}
	const n = 500
	var held, retained float64
	for b.Loop() {
		before := heap()
		for range n {
			code, session, body := post(b, srv.URL, "", strings.NewReader(initializeBody))
			if code != 200 || session == "" {
				b.Fatalf("initialize: %d %s", code, body)
			}
		}
		held += (heap() - before) / n
		for countSessions(s) > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		retained += (heap() - before) / n
	}
	b.ReportMetric(held/float64(b.N), "B/session")
	b.ReportMetric(retained/float64(b.N), "retained-B/session")
}
