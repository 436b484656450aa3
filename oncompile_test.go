package maiden_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestOnCompileToldOfCompilesOnly: Options.OnCompile is told the path of a
// component about to be compiled because no cache held its code, in
// process and in workers alike, and only then: a second host over the same
// disk cache compiles nothing and tells nothing; neither does a second
// call of the first host.
func TestOnCompileToldOfCompilesOnly(t *testing.T) {
	t.Parallel()
	for name, iso := range map[string]maiden.Isolation{"process": maiden.InProcess, "workers": maiden.Workers} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := writeConfig(t, "version = 1\n[tools.echo]\npath = %q\n", "echo")
			cache := t.TempDir()
			var mu sync.Mutex
			var told []string
			newHost := func() *maiden.Host {
				h, err := maiden.New(cfg, &maiden.Options{CacheDir: cache, Isolation: iso, OnCompile: func(path string) {
					mu.Lock()
					told = append(told, path)
					mu.Unlock()
				}})
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			call := func(h *maiden.Host) {
				t.Helper()
				res, err := h.Call(context.Background(), maiden.Call{Tool: "echo", Input: `{"message":"hi"}`})
				if err != nil || !res.OK {
					t.Fatalf("call: %v %+v", err, res.Error)
				}
			}
			h := newHost()
			call(h)
			call(h)
			h.Close(context.Background())
			mu.Lock()
			first := slices.Clone(told)
			mu.Unlock()
			if want := []string{testkit.Component(t, "echo")}; !slices.Equal(first, want) {
				t.Fatalf("told %q by the first host, want %q", first, want)
			}
			h = newHost()
			call(h)
			h.Close(context.Background())
			mu.Lock()
			defer mu.Unlock()
			if len(told) != 1 {
				t.Errorf("told %q in all; the second host found the code in the disk cache and compiled nothing", told)
			}
		})
	}
}
