package sandbox

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/wasmscan"
	"github.com/maiden-run/maiden/internal/wasmscan/scantest"
	"github.com/maiden-run/maiden/internal/wasmtime"
)

// TestLimitRefusesInstanceStateAttack is issue 9's finding: a module of a
// million globals instantiated a hundred times drove host RSS to 2.6 GB with
// memory_mb = 1. CheckBinary must refuse it from its bytes, as invalid, with
// a message naming the state; the bytes themselves are a valid component
// (wasmtime compiles them), so the refusal is the limit and nothing else.
func TestLimitRefusesInstanceStateAttack(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, &Options{CacheDir: "off"})
	attack := scantest.Component(scantest.Module(scantest.ModuleSpec{Globals: 1_000_000}), 100)
	err := CheckBinary(attack)
	if !errors.Is(err, ErrInvalidTool) || !errors.Is(err, wasmscan.ErrLimit) {
		t.Fatalf("CheckBinary = %v, want ErrInvalidTool and wasmscan.ErrLimit", err)
	}
	if want := "component creates 100 core instances holding 100,000,000 globals in total (maiden allows at most 1,000,000)"; !strings.Contains(err.Error(), want) {
		t.Errorf("message %q\nlacks %q", err, want)
	}
	comp, err := sb.engine.NewComponent(attack)
	if err != nil {
		t.Fatalf("the attack fixture is not a valid component: %v", err)
	}
	comp.Close()
}

// TestLimitAttackRefusedAtLoad: through the sandbox's own load path (the
// compile cache), the attack is a result of kind invalid carrying the
// message, and nothing was instantiated (no linear memory was ever created).
func TestLimitAttackRefusedAtLoad(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, &Options{CacheDir: "off"})
	path := filepath.Join(t.TempDir(), "globals.wasm")
	attack := scantest.Component(scantest.Module(scantest.ModuleSpec{Globals: 1_000_000, Memories: 1}), 100)
	if err := os.WriteFile(path, attack, 0o644); err != nil {
		t.Fatal(err)
	}
	want := "component creates 100 core instances holding 100,000,000 globals in total (maiden allows at most 1,000,000)"
	lim := Limits{Timeout: 10 * time.Second, Memory: 1 << 20}
	if _, err := sb.Load(context.Background(), path, lim); !errors.Is(err, ErrInvalidTool) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Load = %v, want ErrInvalidTool containing %q", err, want)
	}
	out := execute(t, sb, path, "{}", lim)
	if out.Failure == nil || out.Failure.Kind != KindInvalid || !strings.Contains(out.Failure.Message, want) {
		t.Fatalf("Execute = %+v, want invalid containing %q", out.Failure, want)
	}
	if out.MemoryPeak != 0 {
		t.Errorf("memory peak %d: something was instantiated", out.MemoryPeak)
	}
}

// TestLimitUnderLoads: a component of the same shape inside the limits
// passes CheckBinary, compiles and instantiates (20 instances of 10,000
// globals, each with a one-page memory: 20 pages fill the ceiling exactly).
func TestLimitUnderLoads(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, &Options{CacheDir: "off"})
	under := scantest.Component(scantest.Module(scantest.ModuleSpec{Globals: 10_000, Functions: 10, Memories: 1}), 20)
	if err := CheckBinary(under); err != nil {
		t.Fatalf("CheckBinary refused a component inside the limits: %v", err)
	}
	comp, err := sb.engine.NewComponent(under)
	if err != nil {
		t.Fatal(err)
	}
	defer comp.Close()
	store, err := wasmtime.NewStore(sb.engine, &wasmtime.StoreOptions{MemoryLimit: 20 << 16, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := sb.linker.Instantiate(store, comp); err != nil {
		t.Fatalf("instantiate: %v", err)
	}
}

// TestLimitStoreRefusesAtRunTime: the store's own limits on instances,
// tables, memories and table size (internal/wasmtime NewStore) stop a
// component that got past the load check, at instantiation, and the call
// reports it as the kind below. CheckBinary refuses all but the last at
// load; this is the second wall for an embedder that skips it.
func TestLimitStoreRefusesAtRunTime(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, &Options{CacheDir: "off"})
	mod := scantest.Module
	type spec = scantest.ModuleSpec
	lim := Limits{Timeout: 30 * time.Second, Memory: 32 << 20}
	tests := []struct {
		name   string
		b      []byte
		kind   Kind
		msg    string
		atLoad bool // CheckBinary refuses it first
	}{
		// wasmtime refuses more than 1,000 instances in one component at
		// compile time; nesting gets past that, and the store stops it.
		{"1100 instances", scantest.Nest(scantest.Component(mod(spec{}), 100), 11), KindTrap, "instance count too high at 1001", true},
		{"21 tables", scantest.Component(mod(spec{Tables: 3}), 7), KindTrap, "table count too high at 21", true},
		{"21 memories", scantest.Component(mod(spec{Memories: 1}), 21), KindTrap, "memory count too high at 21", true},
		// 32 MiB / 8 bytes / 20 tables = 209,715 elements per table: the
		// store's per-table bound follows memory_mb, so only the call
		// knows it.
		{"table over its element limit", scantest.Component(mod(spec{Table: 300_000}), 1), KindTrap, "table minimum size of 300000 elements exceeds table limits", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckBinary(tc.b); (err != nil) != tc.atLoad {
				t.Errorf("CheckBinary = %v, want refused at load: %v", err, tc.atLoad)
			}
			comp, err := sb.engine.NewComponent(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			defer comp.Close()
			res := sb.run(context.Background(), comp, Call{Limits: lim}, "execute")
			if res.hostErr != nil || res.Failure == nil {
				t.Fatalf("run = %+v, want a failure", res)
			}
			t.Logf("%s: %s: %s", tc.name, res.Failure.Kind, res.Failure.Message)
			if res.Failure.Kind != tc.kind || !strings.Contains(res.Failure.Message, tc.msg) {
				t.Fatalf("got %s %q, want %s containing %q", res.Failure.Kind, res.Failure.Message, tc.kind, tc.msg)
			}
		})
	}
}

// BenchmarkInstanceState measures the host memory per item of per-instance
// state (wasmscan.Costs): it instantiates a component of n instances of a
// module holding one kind of state and reports the growth of resident memory
// per item. Resident memory is process-wide, so run it alone:
//
//	go test ./internal/sandbox -run '^$' -bench InstanceState -benchtime 3x
func BenchmarkInstanceState(b *testing.B) {
	type spec = scantest.ModuleSpec
	cases := []struct {
		name  string
		mod   spec
		n     int
		items int // per instance
	}{
		{"global", spec{Globals: 100_000}, 100, 100_000},
		{"function", spec{Functions: 100_000}, 100, 100_000},
		// An untouched table is reserved, not resident; filled (here by an
		// element segment, or later by the guest) it is.
		{"table-element", spec{Table: 1_000_000}, 20, 1_000_000},
		{"table-element-filled", spec{Functions: 1, Table: 1_000_000, ElemEntries: 1_000_000}, 20, 1_000_000},
		{"instance", spec{}, 1000, 1},
	}
	sb := newSandbox(b, &Options{CacheDir: "off"})
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			comp, err := sb.engine.NewComponent(scantest.Component(scantest.Module(tc.mod), tc.n))
			if err != nil {
				b.Fatal(err)
			}
			defer comp.Close()
			var perItem float64
			for b.Loop() {
				store, err := wasmtime.NewStore(sb.engine, &wasmtime.StoreOptions{MemoryLimit: 1 << 20, Tables: 1000, TableElements: 10_000_000})
				if err != nil {
					b.Fatal(err)
				}
				before := rss(b)
				if _, err := sb.linker.Instantiate(store, comp); err != nil {
					b.Fatal(err)
				}
				after := rss(b)
				store.Close()
				// The first run sees fresh pages; later ones may reuse what the
				// previous store freed, so keep the largest.
				perItem = max(perItem, float64(after-before)/float64(tc.n*tc.items))
			}
			b.ReportMetric(perItem, "bytes/"+tc.name)
		})
	}
}

// rss reads the process's resident set size from /proc/self/status.
func rss(tb testing.TB) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatal("VmRSS not in /proc/self/status")
	return 0
}

// BenchmarkCompileAtDefinitionLimit compiles the most nesting-multiplied
// component CheckBinary accepts (981,256 definitions, just under the
// 1,000,000 limit): the compile work the limit leaves. The same shape with
// 900 instantiations per level (729 million) compiled for 26 s here.
func BenchmarkCompileAtDefinitionLimit(b *testing.B) {
	sb := newSandbox(b, &Options{CacheDir: "off"})
	bin := scantest.Nest(scantest.Nest(scantest.Bags(900), 33), 33)
	if err := CheckBinary(bin); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		comp, err := sb.engine.NewComponent(bin)
		if err != nil {
			b.Fatal(err)
		}
		comp.Close()
	}
}
