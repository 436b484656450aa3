package mcpimport_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/mcpimport"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearerTransport is the baseline's way to send the same token.
type bearerTransport struct{ tok string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// BenchmarkImportedCall compares an imported tool's round trip through
// Upstream.Call with calling the same upstream directly with the Go SDK
// client, in the same run: direct is the baseline, upstream is maiden's path
// (with a log and a progress callback, as the host passes them).
func BenchmarkImportedCall(b *testing.B) {
	args := json.RawMessage(`{"message":"benchmark"}`)
	ctx := context.Background()
	// The two are interleaved call by call, so that load from elsewhere on
	// the machine falls on both alike; each reports its median round trip
	// and the ratio of the medians (upstream/direct).
	run := func(b *testing.B, direct *mcp.ClientSession, u *mcpimport.Upstream, tool string) {
		onLog := func(api.LogEntry) {}
		onProgress := func(mcpimport.Progress) {}
		var d, m []time.Duration
		for b.Loop() {
			t0 := time.Now()
			res, err := direct.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			t1 := time.Now()
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
			r, err := u.Call(ctx, tool, args, onLog, onProgress)
			t2 := time.Now()
			if err != nil || r.IsError {
				b.Fatal(err, r)
			}
			d = append(d, t1.Sub(t0))
			m = append(m, t2.Sub(t1))
		}
		md, mm := median(d), median(m)
		b.ReportMetric(float64(md.Nanoseconds()), "direct-p50-ns")
		b.ReportMetric(float64(mm.Nanoseconds()), "upstream-p50-ns")
		b.ReportMetric(float64(mm)/float64(md), "ratio-p50")
		b.ReportMetric(float64(sum(m))/float64(sum(d)), "ratio-mean")
	}

	b.Run("http", func(b *testing.B) {
		h := newHTTPUpstream(b)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: h.url(), HTTPClient: &http.Client{Transport: bearerTransport{testToken}}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		u, err := mcpimport.New(mcpimport.Options{Name: "remote", URL: h.url(), Credential: tokenCredential(testToken)})
		if err != nil {
			b.Fatal(err)
		}
		defer u.Close()
		if err := u.Start(ctx); err != nil {
			b.Fatal(err)
		}
		run(b, cs, u, "echo")
	})

	b.Run("stdio-npm", func(b *testing.B) {
		entry := everythingDir(b)
		node := nodePath(b)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx,
			&mcp.CommandTransport{Command: exec.Command(node, entry, "stdio")}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		u, err := mcpimport.New(mcpimport.Options{Name: "everything", Command: []string{node, entry, "stdio"}})
		if err != nil {
			b.Fatal(err)
		}
		defer u.Close()
		if err := u.Start(ctx); err != nil {
			b.Fatal(err)
		}
		run(b, cs, u, "echo")
	})
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func sum(ds []time.Duration) (t time.Duration) {
	for _, d := range ds {
		t += d
	}
	return t
}
