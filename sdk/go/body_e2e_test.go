//go:build !wasip1

package maiden_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/toolbuild"
)

// randomBody is n pseudo-random bytes (a fixed seed): binary data as it
// comes, half of it >= 0x80 with no pattern a branch predictor could learn.
func randomBody(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// binaryBody is n bytes cycling through all 256 values.
func binaryBody(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7) // every value, not in ascending runs
	}
	return b
}

// loopbackFetch is a FetchFunc that sends each request to srv, a loopback
// TLS server, whatever host the tool named: real HTTPS on 127.0.0.1, and no
// chance of dialling anything else.
func loopbackFetch(srv *httptest.Server) sandbox.FetchFunc {
	client := srv.Client()
	return func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
		_, path, _ := strings.Cut(strings.TrimPrefix(req.URL, "https://"), "/")
		method := req.Method
		if method == "" {
			method = http.MethodGet
		}
		hreq, err := http.NewRequestWithContext(ctx, method, srv.URL+"/"+path, bytes.NewReader(req.Body))
		if err != nil {
			return nil, &sandbox.FetchError{Kind: sandbox.FetchFailed, Message: err.Error()}
		}
		resp, err := client.Do(hreq)
		if err != nil {
			return nil, &sandbox.FetchError{Kind: sandbox.FetchFailed, Message: err.Error()}
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		if err != nil {
			return nil, &sandbox.FetchError{Kind: sandbox.FetchFailed, Message: err.Error()}
		}
		return &sandbox.FetchResponse{Status: resp.StatusCode, Body: body}, nil
	}
}

// TestFetchBinaryBodies: a Go tool (0.2.0, string bodies) receives a 2 MiB
// body holding every byte value from a loopback TLS server byte-exact, and
// sends one the same way (the server echoes what it got).
func TestFetchBinaryBodies(t *testing.T) {
	r := newRun(t)
	big := binaryBody(2 << 20)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/big":
			w.Write(big)
		case "/echo":
			io.Copy(w, req.Body)
		}
	}))
	t.Cleanup(srv.Close)
	fetch := loopbackFetch(srv)
	sum := func(b []byte) string { return fmt.Sprintf("200|%d|%x", len(b), sha256.Sum256(b)) }
	small := append([]byte("text then \x00\x80\xff"), binaryBody(1000)...)
	for _, tt := range []struct {
		name string
		in   map[string]any
		want string
	}{
		{"2 MiB response of every byte", map[string]any{"op": "fetchsum", "url": "https://api.test/big"}, sum(big)},
		{"binary request echoed", map[string]any{"op": "fetchsum", "method": "POST", "url": "https://api.test/echo", "body_b64": base64.StdEncoding.EncodeToString(small)}, sum(small)},
		{"2 MiB request echoed", map[string]any{"op": "fetchsum", "method": "POST", "url": "https://api.test/echo", "body_b64": base64.StdEncoding.EncodeToString(big)}, sum(big)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantOK(t, r.call(t, op(tt.in), fetch), tt.want)
		})
	}
}

// TestToolTargets020: the SDK builds maiden:tool@0.2.0 components (the host
// import and the output-schema export); with -tags maiden_tool_0_1 it
// builds 0.1.0 ones, which the host still runs.
func TestToolTargets020(t *testing.T) {
	for _, tt := range []struct {
		contract   string
		want, deny []string
	}{
		{"0.2.0", []string{"import maiden:tool/host@0.2.0", "export output-schema"}, []string{"host@0.1.0"}},
		{"0.1.0", []string{"import maiden:tool/host@0.1.0"}, []string{"host@0.2.0", "output-schema"}},
	} {
		t.Run(tt.contract, func(t *testing.T) {
			path := buildContract(t, tt.contract)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tc, err := toolbuild.EnsureToolchain(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			w, err := tc.WIT(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.want {
				if !strings.Contains(w, s) {
					t.Errorf("component WIT lacks %q:\n%s", s, w)
				}
			}
			for _, s := range tt.deny {
				if strings.Contains(w, s) {
					t.Errorf("component WIT has %q:\n%s", s, w)
				}
			}
			sb, err := sharedSandbox()
			if err != nil {
				t.Fatal(err)
			}
			big := binaryBody(300 << 10)
			fetch := func(context.Context, sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
				return &sandbox.FetchResponse{Status: 200, Body: big}, nil
			}
			out, err := sb.Execute(context.Background(), sandbox.Call{Path: path, Limits: limits, Input: `{"op":"fetchsum","url":"https://a.test/"}`, Fetch: fetch})
			if err != nil {
				t.Fatal(err)
			}
			wantOK(t, out, fmt.Sprintf("200|%d|%x", len(big), sha256.Sum256(big)))
		})
	}
}

var (
	contractMu     sync.Mutex
	contractBuilds = map[string]string{}
)

// buildContract builds sdktool against one contract version: "0.2.0" is
// the SDK's default (the same build as buildTool), "0.1.0" adds
// -tags maiden_tool_0_1 through GOFLAGS, as a tool author would.
func buildContract(t testing.TB, contract string) string {
	t.Helper()
	if contract == "0.2.0" {
		return buildTool(t, "sdktool")
	}
	contractMu.Lock()
	defer contractMu.Unlock()
	if p, ok := contractBuilds[contract]; ok {
		return p
	}
	prev, had := os.LookupEnv("GOFLAGS")
	os.Setenv("GOFLAGS", strings.TrimSpace(prev+" -tags=maiden_tool_0_1"))
	defer func() {
		if had {
			os.Setenv("GOFLAGS", prev)
		} else {
			os.Unsetenv("GOFLAGS")
		}
	}()
	// testkit's cache keys a Go tool by GOFLAGS too: this build and the
	// untagged one are cached apart.
	out := testkit.Component(t, "sdk/sdktool")
	contractBuilds[contract] = out
	return out
}

// BenchmarkFetch2MiB is the end-to-end time of a call in which a Go tool
// receives a 2 MiB response body through http-fetch: a fresh instance
// (Go runtime start), the fetch (a FetchFunc that returns the body at once,
// so the egress gate's own cost is not in it), the body handed to the tool
// and its length returned. 0.1.0 (list<u8>) against 0.2.0 (string), for a
// binary body (random bytes: the worst case for 0.2.0, 1.5 bytes of string
// per byte and a decode that cannot skip ASCII) and a text body (JSON). "none" is the same call with no fetch,
// the fixed cost. Reports p50 and p99 like bench/.
//
//	go test ./sdk/go -run '^$' -bench Fetch2MiB
func BenchmarkFetch2MiB(b *testing.B) {
	sb, err := sharedSandbox()
	if err != nil {
		b.Fatal(err)
	}
	bodies := map[string][]byte{
		"binary": randomBody(2 << 20),
		"text":   bytes.Repeat([]byte(`{"id":12345,"name":"a name","ok":true},`), (2<<20)/39+1)[:2<<20],
		"none":   nil,
	}
	for _, contract := range []string{"0.1.0", "0.2.0"} {
		path := buildContract(b, contract)
		for _, kind := range []string{"none", "text", "binary"} {
			b.Run(contract+"/"+kind, func(b *testing.B) {
				body := bodies[kind]
				fetch := func(context.Context, sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
					return &sandbox.FetchResponse{Status: 200, Body: body}, nil
				}
				input, want := `{"op":"fetchlen","url":"https://a.test/"}`, fmt.Sprintf("200|%d", len(body))
				if kind == "none" {
					input, want = `{"op":"echo","msg":"x"}`, "x"
				}
				call := func() time.Duration {
					start := time.Now()
					out, err := sb.Execute(context.Background(), sandbox.Call{Path: path, Limits: limits, Input: input, Fetch: fetch})
					d := time.Since(start)
					if err != nil || out.Failure != nil || out.Output != want {
						b.Fatalf("got %+v, %v; want %q", out, err, want)
					}
					return d
				}
				call() // compile and warm the cache outside the timing
				var d []time.Duration
				for b.Loop() {
					d = append(d, call())
				}
				slices.Sort(d)
				b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}
