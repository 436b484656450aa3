package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/store"
	"github.com/maiden-run/maiden/internal/testkit"
)

// BenchmarkAuthorize is the cost of authority on the tiny WAT tool's
// in-process call: the implicit agent (no [agents], nothing to decide)
// against a declared agent whose wallet in the state store holds 10 cards,
// the allowing one last. Compare the two rows' p50 in one run: the issue's
// bound is 1.10×.
func BenchmarkAuthorize(b *testing.B) {
	for _, cardsN := range ordered([]int{0, 10}) {
		name := "implicit"
		if cardsN > 0 {
			name = fmt.Sprintf("cards-%d", cardsN)
		}
		b.Run(name, func(b *testing.B) {
			h, agent := authHost(b, cardsN)
			ctx := context.Background()
			measure(b, 1, func() (func() error, func()) {
				return func() error {
					res, err := h.Call(ctx, maiden.Call{Agent: agent, Tool: "echo", Input: input})
					if err != nil {
						return err
					}
					return checkOutput(res.OK, res.Output, res.Error, input)
				}, nil
			})
		})
	}
}

// authHost is a host on the WAT echo tool; with n > 0 an agent "bench"
// holds n cards, of which only the last allows the call.
func authHost(b *testing.B, n int) (*maiden.Host, string) {
	b.Helper()
	dir := b.TempDir()
	body := fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n", testkit.Component(b, "echo"))
	agent := ""
	if n > 0 {
		agent = "bench"
		body += "[agents.bench]\ntools = [\"echo\"]\n"
	}
	path := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	if n > 0 {
		st, err := store.Open(context.Background(), cfg.StatePath(), nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := st.EnsureAgent(context.Background(), agent); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			text := fmt.Sprintf("tool:invoke other%d --...", i)
			if i == n-1 {
				text = "tool:invoke echo --message=*"
			}
			g, err := grant.Parse(text)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := st.Grant(context.Background(), agent, cards.Spec{LowerPos: cards.Any(g)}); err != nil {
				b.Fatal(err)
			}
		}
		st.Close()
	}
	h, err := maiden.New(cfg, &maiden.Options{Isolation: maiden.InProcess, CacheDir: testkit.CompileCache(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	return h, agent
}
