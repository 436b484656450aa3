package mcpserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// BenchmarkHTTPAuth measures a ping on an open legacy session, the
// cheapest request there is, as the implicit agent behind a static token
// (a digest compared in memory) and as a declared agent whose token the
// state store checks at every request. Compare the two in one run.
func BenchmarkHTTPAuth(b *testing.B) {
	for _, mode := range []string{"static-token", "agent-token"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "agent.toml")
			writeAgentTOML(b, path, []toolLine{{"echo", "echo", ""}})
			if mode == "agent-token" {
				f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				f.WriteString("\n[agents.alice]\ntools = [\"echo\"]\n")
				f.Close()
			}
			cfg, err := config.Load(path)
			if err != nil {
				b.Fatal(err)
			}
			state := filepath.Join(dir, "state.db")
			h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(b), StatePath: state})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			s := New(h, nil)
			if _, err := s.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			token := "static-bench-token"
			o := HTTPOptions{AuthToken: token}
			if mode == "agent-token" {
				o = HTTPOptions{}
				st, err := store.Open(context.Background(), state, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				if err := st.EnsureAgent(context.Background(), "alice"); err != nil {
					b.Fatal(err)
				}
				if token, _, err = st.MintToken(context.Background(), "alice"); err != nil {
					b.Fatal(err)
				}
			}
			srv := httptest.NewServer(s.HTTPHandler(o))
			defer srv.Close()
			do := func(session, body string) (int, string) {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", "Bearer "+token)
				if session != "" {
					req.Header.Set("Mcp-Session-Id", session)
					req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
			}
			code, session := do("", initializeBody)
			if code != http.StatusOK || session == "" {
				b.Fatalf("initialize: %d", code)
			}
			for b.Loop() {
				if code, _ := do(session, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); code != http.StatusOK {
					b.Fatalf("ping: %d", code)
				}
			}
		})
	}
}

// BenchmarkAuthenticate measures authenticating one agent token with the
// store (Host.Authenticate, what every HTTP request of a declared agent
// costs) against the static token's in-memory digest comparison.
func BenchmarkAuthenticate(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "agent.toml")
	writeAgentTOML(b, path, []toolLine{{"echo", "echo", ""}})
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	f.WriteString("\n[agents.alice]\ntools = [\"echo\"]\n")
	f.Close()
	cfg, err := config.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	state := filepath.Join(dir, "state.db")
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(b), StatePath: state})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	st, err := store.Open(context.Background(), state, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.EnsureAgent(context.Background(), "alice"); err != nil {
		b.Fatal(err)
	}
	token, _, err := st.MintToken(context.Background(), "alice")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			if a, err := h.Authenticate(ctx, token); err != nil || a != "alice" {
				b.Fatalf("%q %v", a, err)
			}
		}
	})
	b.Run("static-digest", func(b *testing.B) {
		want := sha256.Sum256([]byte(token))
		for b.Loop() {
			got := sha256.Sum256([]byte(token))
			if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				b.Fatal("mismatch")
			}
		}
	})
}
