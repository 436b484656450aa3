package wasmscan_test

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/wasmscan"
	"github.com/maiden-run/maiden/internal/wasmscan/scantest"
)

// TestAttackIsRefused is the red-team finding: one module of a million
// globals instantiated a hundred times (2.6 GB of host memory with
// memory_mb = 1). It must be refused by its bytes, with a message that says
// what and why.
func TestAttackIsRefused(t *testing.T) {
	b := scantest.Component(scantest.Module(scantest.ModuleSpec{Globals: 1_000_000}), 100)
	err := wasmscan.CheckLimits(b)
	if !errors.Is(err, wasmscan.ErrLimit) {
		t.Fatalf("CheckLimits = %v, want ErrLimit", err)
	}
	for _, want := range []string{
		"component creates 100 core instances holding 100,000,000 globals in total (maiden allows at most 1,000,000)",
		"of host memory by estimate (maiden allows at most 64.0 MiB)",
		"outside memory_mb",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q\nlacks %q", err, want)
		}
	}
}

// TestJustUnderTheLimitsPasses: the same shape at the limits is accepted, so
// the limits refuse the attack and not components of its kind.
func TestJustUnderTheLimitsPasses(t *testing.T) {
	b := scantest.Component(scantest.Module(scantest.ModuleSpec{Globals: 10_000}), 100)
	st, err := wasmscan.Scan(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.Globals != 1_000_000 || st.CoreInstances != 100 {
		t.Fatalf("totals %+v, want 1,000,000 globals in 100 instances", st.Totals)
	}
	if err := wasmscan.DefaultLimits.Check(st.Totals); err != nil {
		t.Fatalf("refused at the limit: %v", err)
	}
}

// TestEachLimit breaks one limit at a time; each must be named.
func TestEachLimit(t *testing.T) {
	mod := scantest.Module
	type spec = scantest.ModuleSpec
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"instances", scantest.Component(mod(spec{}), 1001), "component creates 1,001 core instances (maiden allows at most 1,000);"},
		{"globals", scantest.Component(mod(spec{Globals: 1_000_001}), 1), "1,000,001 globals in total"},
		{"tables", scantest.Component(mod(spec{Tables: 3}), 7), "21 tables in total (maiden allows at most 20)"},
		{"memories", scantest.Component(mod(spec{Memories: 1}), 21), "21 memories in total (maiden allows at most 20)"},
		{"table elements", scantest.Component(mod(spec{Table: 1_000_000}), 5), "5,000,000 table elements in total"},
		{"element entries", scantest.Component(mod(spec{Functions: 1, Table: 1_000_000, ElemEntries: 1_000_000}), 5), "5,000,000 element segment entries in total"},
		{"data", scantest.Component(mod(spec{DataBytes: 1 << 20}), 257), "257.0 MiB of data segments (maiden allows at most 256.0 MiB)"},
		{"host bytes", scantest.Component(mod(spec{Functions: 100_000}), 30), "of host memory by estimate"},
		// Instances made of exports hold no state, but wasmtime's compiler
		// walks a nested component's definitions once per instantiation:
		// this 7 KB component compiled for 26 s.
		{"compile work", scantest.Nest(scantest.Nest(scantest.Bags(900), 900), 900), "component instantiates nested components so often that compiling it walks 729,811,801 component-level definitions (maiden allows at most 1,000,000)"},
		{"nested", scantest.Nest(scantest.Component(mod(spec{Globals: 100}), 100), 101), "10,100 core instances (maiden allows at most 1,000) holding 1,010,000 globals"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := wasmscan.CheckLimits(tc.b)
			if !errors.Is(err, wasmscan.ErrLimit) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckLimits = %v\nwant ErrLimit containing %q", err, tc.want)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	m := scantest.Module(scantest.ModuleSpec{Globals: 7, Functions: 5, Table: 40, Tables: 2, Memories: 1, DataBytes: 300, ElemEntries: 3})
	st, err := wasmscan.Scan(scantest.Nest(scantest.Component(m, 3), 2))
	if err != nil {
		t.Fatal(err)
	}
	want := wasmscan.Totals{CoreInstances: 6, Functions: 30, Globals: 42, Tables: 18, TableElements: 6 * 42,
		Memories: 6, MemoryBytes: 6 << 16, DataBytes: 1800, ElemEntries: 18,
		Definitions: 2*(1+3) + 1 + 2} // inner: module, 3 instances; twice; outer: component, 2 instances
	got := st.Totals
	got.HostBytes = 0
	if got != want {
		t.Errorf("totals\n got %+v\nwant %+v", got, want)
	}
	c := wasmscan.DefaultCosts
	if wantHost := 6 * (c.Instance + 7*c.Global + 5*c.Function + 42*c.TableElement + 3*c.ElemEntry); st.HostBytes != wantHost {
		t.Errorf("host bytes %d, want %d", st.HostBytes, wantHost)
	}
	if len(st.Modules) != 1 || st.Components != 1 {
		t.Errorf("%d modules, %d components; want 1 and 1", len(st.Modules), st.Components)
	}
}

// TestNestingSaturates: components nested inside each other multiply
// instances (2^30 here from a few hundred bytes). The totals must saturate
// rather than wrap around to something small, and the scan stays fast.
func TestNestingSaturates(t *testing.T) {
	b := scantest.Component(scantest.Module(scantest.ModuleSpec{Globals: 1}), 2)
	for range 30 {
		b = scantest.Nest(b, 1000)
	}
	st, err := wasmscan.Scan(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.CoreInstances != ^uint64(0) || st.Globals != ^uint64(0) {
		t.Fatalf("totals %+v, want saturated", st.Totals)
	}
	if err := wasmscan.DefaultLimits.Check(st.Totals); !errors.Is(err, wasmscan.ErrLimit) {
		t.Fatalf("Check = %v, want ErrLimit", err)
	}
}

// Hand-encoded components for the index-space paths the generator does not
// take: imports, exports and aliases of modules and components.
var (
	preamble = []byte("\x00asm\x0d\x00\x01\x00")
	bigMod   = scantest.Module(scantest.ModuleSpec{Globals: 1000})
	smallMod = scantest.Module(scantest.ModuleSpec{Globals: 1})
)

func sec(id byte, payload ...[]byte) []byte {
	var p []byte
	for _, x := range payload {
		p = append(p, x...)
	}
	return append(uleb([]byte{id}, uint64(len(p))), p...)
}

func uleb(b []byte, v uint64) []byte {
	for ; v >= 0x80; v >>= 7 {
		b = append(b, byte(v)|0x80)
	}
	return append(b, byte(v))
}

func comp(sections ...[]byte) []byte {
	out := append([]byte{}, preamble...)
	for _, s := range sections {
		out = append(out, s...)
	}
	return out
}

// coreInst instantiates module idx n times.
func coreInst(idx byte, n int) []byte {
	p := uleb(nil, uint64(n))
	for range n {
		p = append(p, 0x00, idx, 0x00)
	}
	return sec(2, p)
}

func TestIndexSpaces(t *testing.T) {
	tests := []struct {
		name    string
		b       []byte
		globals uint64
		inst    uint64
	}{{
		// An imported module is unknown until run time: each instantiation
		// is charged as the largest module in the binary.
		name:    "imported module charged as the largest",
		b:       comp(sec(1, smallMod), sec(1, bigMod), sec(10, []byte{1, 0x00, 1, 'm', 0x00, 0x11, 0}), coreInst(2, 3)),
		globals: 3000, inst: 3,
	}, {
		// export adds an index aliasing module 0 (small): index 1 is it.
		name:    "exported module keeps its identity",
		b:       comp(sec(1, smallMod), sec(1, bigMod), sec(11, []byte{1, 0x00, 1, 'e', 0x00, 0x11, 0, 0x00}), coreInst(2, 4)),
		globals: 4, inst: 4,
	}, {
		// A nested component aliases the outer big module and instantiates
		// it twice; the outer instantiates the nested component 3 times.
		name: "outer alias of a module",
		b: comp(sec(1, bigMod), sec(4, comp(
			sec(6, []byte{1, 0x00, 0x11, 0x02, 1, 0}),
			coreInst(0, 2),
		)), sec(5, []byte{3, 0x00, 0, 0, 0x00, 0, 0, 0x00, 0, 0})),
		globals: 6000, inst: 6,
	}, {
		// A module taken from a component instance's exports: unknown,
		// charged as the largest.
		name:    "module aliased from an instance export",
		b:       comp(sec(1, smallMod), sec(1, bigMod), sec(6, []byte{1, 0x00, 0x11, 0x00, 0, 1, 'x'}), coreInst(2, 1)),
		globals: 1000, inst: 1,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := wasmscan.Scan(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if st.Globals != tc.globals || st.CoreInstances != tc.inst {
				t.Fatalf("%d globals in %d instances, want %d in %d", st.Globals, st.CoreInstances, tc.globals, tc.inst)
			}
		})
	}
}

// TestHostileBinaries: bytes that lie must fail as malformed (or
// unbounded), never panic, never be accepted with a small count.
func TestHostileBinaries(t *testing.T) {
	good := scantest.Component(scantest.Module(scantest.ModuleSpec{Globals: 3, Functions: 2}), 2)
	// A global section claiming 2^32-1 globals in 3 bytes.
	liarModule := append([]byte("\x00asm\x01\x00\x00\x00"), 6, 5, 0xff, 0xff, 0xff, 0xff, 0x0f)
	tests := []struct {
		name string
		b    []byte
		want error
		msg  string
	}{
		{"empty", nil, wasmscan.ErrMalformed, "not a WebAssembly component"},
		{"core module", smallMod, wasmscan.ErrMalformed, "a core module"},
		{"truncated", good[:len(good)-3], wasmscan.ErrMalformed, "runs past the end"},
		{"lying global count", comp(sec(1, liarModule)), wasmscan.ErrMalformed, "global count 4294967295 does not fit"},
		{"lying instance count", comp(sec(1, smallMod), sec(2, []byte{0xff, 0xff, 0xff, 0xff, 0x0f})), wasmscan.ErrMalformed, "count 4294967295 does not fit"},
		{"module index out of range", comp(sec(1, smallMod), coreInst(5, 1)), wasmscan.ErrMalformed, "instantiates module 5 of 1"},
		{"component index out of range", comp(sec(5, []byte{1, 0x00, 0, 0})), wasmscan.ErrMalformed, "instantiates component 0 of 0"},
		{"outer alias too far", comp(sec(6, []byte{1, 0x00, 0x11, 0x02, 3, 0})), wasmscan.ErrMalformed, "reaches 3 components out"},
		{"over-long LEB", comp(sec(2, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01})), wasmscan.ErrMalformed, "too large"},
		{"section longer than file", append(comp(), 2, 0xff, 0x01), wasmscan.ErrMalformed, "runs past the end"},
		{"trailing bytes in a section", comp(sec(2, []byte{0, 0xaa})), wasmscan.ErrMalformed, "left over"},
		{"imported component instantiated", comp(sec(10, []byte{1, 0x00, 1, 'c', 0x04, 0}), sec(5, []byte{1, 0x00, 0, 0})), wasmscan.ErrUnbounded, "imports or takes from another instance"},
		{"bad nested preamble", comp(sec(4, []byte("\x00asm\x01\x00\x00\x00"))), wasmscan.ErrMalformed, "component preamble"},
	}
	deep := preamble
	for range 40 {
		deep = comp(sec(4, deep))
	}
	tests = append(tests, struct {
		name string
		b    []byte
		want error
		msg  string
	}{"nested too deep", deep, wasmscan.ErrMalformed, "nested more than 32 deep"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wasmscan.Scan(tc.b)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Scan = %v\nwant %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

// TestUnknownConstExprFallsBack: a data or element segment this scanner
// cannot decode is bounded by its section's size instead of refused (wasmtime
// decides whether it is valid).
func TestUnknownConstExprFallsBack(t *testing.T) {
	// data section: 1 segment, active, offset uses opcode 0x99, 4 bytes.
	data := []byte{1, 0x00, 0x99, 0x0b, 4, 1, 2, 3, 4}
	mod := append([]byte("\x00asm\x01\x00\x00\x00"), sec(11, data)...)
	st, err := wasmscan.Scan(comp(sec(1, mod), coreInst(0, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if st.DataBytes != uint64(len(data)) {
		t.Fatalf("data bytes %d, want the section size %d", st.DataBytes, len(data))
	}
}

// TestScanAllocatesOnlyWhatIsThere: counts in the bytes never size an
// allocation. A 40-byte binary full of maximal counts must not make the
// scanner allocate more than a few KiB.
func TestScanAllocatesOnlyWhatIsThere(t *testing.T) {
	max := []byte{0xff, 0xff, 0xff, 0xff, 0x0f}
	inputs := [][]byte{
		comp(sec(2, max)), comp(sec(5, max)), comp(sec(6, max)), comp(sec(10, max)), comp(sec(11, max)),
		comp(sec(1, append([]byte("\x00asm\x01\x00\x00\x00"), sec(6, max)...))),
		comp(sec(1, append([]byte("\x00asm\x01\x00\x00\x00"), sec(9, max)...))),
	}
	for _, b := range inputs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		st, err := wasmscan.Scan(b)
		runtime.ReadMemStats(&after)
		// An element section it cannot decode is bounded by its size
		// rather than refused; anything else must be refused.
		if err == nil && (st.ElemEntries > uint64(len(b)) || st.Globals > 0 || st.CoreInstances > 0) {
			t.Errorf("Scan(% x) accepted a count its bytes do not hold: %+v", b, st.Totals)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 16<<10 {
			t.Errorf("Scan(% x) allocated %d bytes", b, got)
		}
	}
}

func BenchmarkScanAttack(b *testing.B) {
	bin := scantest.Component(scantest.Module(scantest.ModuleSpec{Globals: 1_000_000}), 100)
	b.SetBytes(int64(len(bin)))
	for b.Loop() {
		if _, err := wasmscan.Scan(bin); err != nil {
			b.Fatal(err)
		}
	}
}

// TestImportsAndCanonsAreCharged: state that is neither a global nor a
// table still costs host memory per instance: a record per imported global
// (or table, memory, tag) in each core instance, and one per canonical
// definition in each component instance. Both multiply with instantiation.
func TestImportsAndCanonsAreCharged(t *testing.T) {
	const n = 100_000
	imps := uleb(nil, n)
	for range n {
		imps = append(imps, 1, 'm', 1, 'g', 0x03, 0x7f, 0x00) // import "m" "g" (global i32)
	}
	importer := append([]byte("\x00asm\x01\x00\x00\x00"), sec(2, imps)...)
	// n canonical definitions (resource.drop of type 0, 2 bytes each): the
	// scanner counts them without decoding.
	canons := uleb(nil, n)
	for range n {
		canons = append(canons, 0x03, 0x00)
	}
	tests := []struct {
		name string
		b    []byte
		want wasmscan.Totals
	}{
		{"imported globals", comp(sec(1, importer), coreInst(0, 100)), wasmscan.Totals{CoreInstances: 100, Imports: 100 * n, Definitions: 101}},
		{"canonical definitions", scantest.Nest(comp(sec(8, canons)), 100), wasmscan.Totals{CanonFunctions: 100 * n, Definitions: 100*n + 101}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := wasmscan.Scan(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			got := st.Totals
			got.HostBytes = 0
			if got != tc.want {
				t.Errorf("totals\n got %+v\nwant %+v", got, tc.want)
			}
			err = wasmscan.DefaultLimits.Check(st.Totals)
			if !errors.Is(err, wasmscan.ErrLimit) || !strings.Contains(err.Error(), "of host memory by estimate") {
				t.Fatalf("Check = %v, want the host-memory limit", err)
			}
		})
	}
}

// BenchmarkScanJS scans a componentize-js tool (12 MB), the largest real
// component the repository builds: the cost CheckBinary adds to a load.
func BenchmarkScanJS(b *testing.B) {
	bin, err := os.ReadFile(testkit.Component(b, "js/echo"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(bin)))
	for b.Loop() {
		if _, err := wasmscan.Scan(bin); err != nil {
			b.Fatal(err)
		}
	}
}
