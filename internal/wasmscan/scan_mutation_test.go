package wasmscan_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/wasmscan"
	"github.com/maiden-run/maiden/internal/wasmscan/scantest"
)

// The tests of this file were added by the mutation pass over the parsers
// and file guards (docs/security-tests.md, "Fifteenth pass: parsers and file
// guards"; docs/mutation/parsers.tsv): each is red with a bug it names
// planted.

// TestCheckAtItsEdges: each of maiden's limits is what its value says, to
// the unit: a component's totals exactly at a limit pass, one more is
// refused naming it (the generated components of TestEachLimit break most
// limits by far more than one). The values are spelt out here, so a limit
// raised in DefaultLimits is seen too.
func TestCheckAtItsEdges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		at    func(*wasmscan.Totals, uint64)
		limit uint64
		want  string
	}{
		{"core instances", func(t *wasmscan.Totals, n uint64) { t.CoreInstances = n }, 1000, "component creates 1,001 core instances (maiden allows at most 1,000)"},
		{"globals", func(t *wasmscan.Totals, n uint64) { t.Globals = n }, 1_000_000, "1,000,001 globals in total (maiden allows at most 1,000,000)"},
		{"tables", func(t *wasmscan.Totals, n uint64) { t.Tables = n }, 20, "21 tables in total (maiden allows at most 20)"},
		{"table elements", func(t *wasmscan.Totals, n uint64) { t.TableElements = n }, 4_000_000, "4,000,001 table elements in total (maiden allows at most 4,000,000)"},
		{"memories", func(t *wasmscan.Totals, n uint64) { t.Memories = n }, 20, "21 memories in total (maiden allows at most 20)"},
		{"element entries", func(t *wasmscan.Totals, n uint64) { t.ElemEntries = n }, 4_000_000, "4,000,001 element segment entries in total (maiden allows at most 4,000,000)"},
		{"data bytes", func(t *wasmscan.Totals, n uint64) { t.DataBytes = n }, 256 << 20, "256.0 MiB of data segments (maiden allows at most 256.0 MiB)"},
		{"host bytes", func(t *wasmscan.Totals, n uint64) { t.HostBytes = n }, 64 << 20, "64.0 MiB of host memory by estimate (maiden allows at most 64.0 MiB)"},
		{"definitions", func(t *wasmscan.Totals, n uint64) { t.Definitions = n }, 1_000_000, "compiling it walks 1,000,001 component-level definitions (maiden allows at most 1,000,000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var at, over wasmscan.Totals
			tc.at(&at, tc.limit)
			tc.at(&over, tc.limit+1)
			if err := wasmscan.DefaultLimits.Check(at); err != nil {
				t.Errorf("%s exactly at %d: %v; want it accepted", tc.name, tc.limit, err)
			}
			err := wasmscan.DefaultLimits.Check(over)
			if !errors.Is(err, wasmscan.ErrLimit) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s at %d: %v; want ErrLimit saying %q", tc.name, tc.limit+1, err, tc.want)
			}
		})
	}
}

// TestCheckLimitsRefusesWhatScanRefuses: CheckLimits (sandbox.CheckBinary's
// check at load) refuses a component Scan cannot read or bound, not only
// one over the limits: its totals would be zero.
func TestCheckLimitsRefusesWhatScanRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want error
		msg  string
	}{
		{"malformed", comp(sec(2, []byte{0xff, 0xff, 0xff, 0xff, 0x0f})), wasmscan.ErrMalformed, "count 4294967295 does not fit"},
		{"unbounded", comp(sec(10, []byte{1, 0x00, 1, 'c', 0x04, 0}), sec(5, []byte{1, 0x00, 0, 0})), wasmscan.ErrUnbounded, "imports or takes from another instance"},
	} {
		if err := wasmscan.CheckLimits(tc.b); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: CheckLimits = %v; want %v saying %q", tc.name, err, tc.want, tc.msg)
		}
	}
}

// TestNestingAtItsEdge: components nested 32 deep (the top-level one
// counted) are read; 33 are refused.
func TestNestingAtItsEdge(t *testing.T) {
	deep := preamble
	for range 31 {
		deep = comp(sec(4, deep))
	}
	if st, err := wasmscan.Scan(deep); err != nil || st.Components != 31 {
		t.Fatalf("32 components nested: %d nested, %v; want 31 nested and no error", st.Components, err)
	}
	deep = comp(sec(4, deep))
	if _, err := wasmscan.Scan(deep); !errors.Is(err, wasmscan.ErrMalformed) || !strings.Contains(err.Error(), "components nested more than 32 deep") {
		t.Fatalf("33 components nested: %v; want ErrMalformed, nested more than 32 deep", err)
	}
}

// TestIndexOneTooFarRefused: an index equal to the length of its index
// space (one past its last entry) is refused as malformed, naming it,
// never read (the index is the bytes'). So are LEB128 integers whose last
// byte holds bits past the integer's width (wasmtime's reading: 2^32+1 is
// not a u32 of 1), a count its bytes cannot hold (a global takes at least
// one byte, an import four), core modules of a version other than 1, and
// an import kind or limits flag no proposal defines.
func TestIndexOneTooFarRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		msg  string
	}{
		{"module index", comp(sec(1, smallMod), coreInst(1, 1)), "core instance 0 instantiates module 1 of 1"},
		{"outer alias count", comp(sec(6, []byte{1, 0x00, 0x11, 0x02, 1, 0})), "outer alias 0 reaches 1 components out, only 0 enclose it"},
		{"exported module", comp(sec(1, smallMod), sec(11, []byte{1, 0x00, 1, 'e', 0x00, 0x11, 1, 0x00})), "export 0 names module 1 of 1"},
		{"exported component", comp(sec(11, []byte{1, 0x00, 1, 'e', 0x04, 0, 0x00})), "export 0 names component 0 of 0"},
		{"u32 with bits past 32", comp(sec(1, smallMod), sec(2, []byte{0x81, 0x80, 0x80, 0x80, 0x10, 0x00, 0, 0})), "integer too large for 32 bits"},
		{"s33 of six bytes", comp(sec(1, append([]byte("\x00asm\x01\x00\x00\x00"), sec(4, []byte{1, 0x63, 0xf0, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00, 1})...))), "signed integer too large for 33 bits"},
		{"core module version 2", comp(sec(1, []byte("\x00asm\x02\x00\x00\x00"))), "core module does not start with the WebAssembly 1 preamble"},
		{"unknown import kind", comp(sec(1, append([]byte("\x00asm\x01\x00\x00\x00"), sec(2, []byte{1, 1, 'm', 1, 'x', 0x05, 0})...))), "unknown import kind 0x05"},
		{"global count past its bytes", comp(sec(1, append([]byte("\x00asm\x01\x00\x00\x00"), sec(6, []byte{0xe8, 0x07, 0x7f, 0x00, 0x41, 0x00, 0x0b})...))), "global count 1000 does not fit in the 5 bytes left"},
		{"import count past its bytes", comp(sec(1, append([]byte("\x00asm\x01\x00\x00\x00"), sec(2, []byte{2, 1, 'm', 1, 'x', 0x00})...))), "import count 2 does not fit in the 5 bytes left"},
		{"component section one byte past the end", append(comp(), 2, 1), "component section of 1 bytes runs past the end (0 bytes left)"},
		{"core section one byte past its module", comp(sec(1, append([]byte("\x00asm\x01\x00\x00\x00"), 6, 2, 0)), sec(2, []byte{0})), "core module section of 2 bytes runs past the end (1 bytes left)"},
		{"name one byte past its section", comp(sec(11, []byte{1, 0x00, 2, 'e'})), "name of 2 bytes runs past the end (1 bytes left)"},
		{"unknown limits flag", comp(sec(1, append([]byte("\x00asm\x01\x00\x00\x00"), sec(5, []byte{1, 0x10, 1})...))), "unknown limits flags 0x10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wasmscan.Scan(tc.b)
			if !errors.Is(err, wasmscan.ErrMalformed) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Scan = %v; want ErrMalformed saying %q", err, tc.msg)
			}
		})
	}
}

// TestEveryImportAndTableFormCounted: a core module's imports of each kind
// (a function, a table, a memory, a global, a tag) are charged, the
// function as a function and the others as imports, and tables and
// memories are counted in each form of their encoding: with a maximum,
// with an initialiser, of a (ref null ht) type, with a custom page size.
func TestEveryImportAndTableFormCounted(t *testing.T) {
	imports := []byte{5,
		1, 'm', 1, 'f', 0x00, 0, // func type 0
		1, 'm', 1, 't', 0x01, 0x70, 0x00, 1, // table funcref min 1
		1, 'm', 1, 'm', 0x02, 0x00, 1, // memory min 1
		1, 'm', 1, 'g', 0x03, 0x7f, 0x00, // global i32 const
		1, 'm', 1, 'e', 0x04, 0x00, 0, // tag type 0
	}
	tables := []byte{3,
		0x70, 0x01, 5, 100, // funcref, min 5, max 100
		0x40, 0x00, 0x70, 0x00, 3, 0xd0, 0x70, 0x0b, // with an initialiser: ref.null func
		0x63, 0x70, 0x00, 2, // (ref null func), min 2
	}
	memories := []byte{2,
		0x01, 1, 2, // min 1 page, max 2
		0x08, 3, 0, // min 3, page size 2^0
	}
	mod := append([]byte("\x00asm\x01\x00\x00\x00"), sec(2, imports)...)
	mod = append(mod, sec(4, tables)...)
	mod = append(mod, sec(5, memories)...)
	st, err := wasmscan.Scan(comp(sec(1, mod), coreInst(0, 3)))
	if err != nil {
		t.Fatal(err)
	}
	got := st.Totals
	got.HostBytes, got.Definitions = 0, 0
	want := wasmscan.Totals{CoreInstances: 3, Functions: 3, Imports: 12, Tables: 9, TableElements: 30, Memories: 6, MemoryBytes: 3 * (1<<16 + 3)}
	if got != want {
		t.Errorf("totals\n got %+v\nwant %+v", got, want)
	}
	c := wasmscan.DefaultCosts
	if wantHost := 3 * (c.Instance + c.Function + 4*c.Import + 10*c.TableElement); st.HostBytes != wantHost {
		t.Errorf("host bytes %d, want %d", st.HostBytes, wantHost)
	}
}

// TestComponentIndexSpaces: every definition that adds a component index
// (an alias of an instance's export, an outer alias, an export) adds
// exactly one, so an instantiation by index reaches the component the
// bytes name: an unknown one is refused as unbounded, a known big one is
// charged as itself, never as a smaller neighbour.
func TestComponentIndexSpaces(t *testing.T) {
	big := scantest.Component(bigMod, 1)
	small := scantest.Component(smallMod, 1)
	// A component aliased from an instance's export, then a small one
	// defined: instantiating index 0 is the unknown one.
	_, err := wasmscan.Scan(comp(sec(6, []byte{1, 0x04, 0x00, 0, 1, 'x'}), sec(4, small), sec(5, []byte{1, 0x00, 0, 0})))
	if !errors.Is(err, wasmscan.ErrUnbounded) || !strings.Contains(err.Error(), "instance 0 instantiates component 0") {
		t.Errorf("a component aliased from an instance's export: %v; want ErrUnbounded for component 0", err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		// Big (0), exported (1, big again), small (2); index 1 instantiated.
		{"exported component", comp(sec(4, big), sec(11, []byte{1, 0x00, 1, 'e', 0x04, 0, 0x00}), sec(4, small), sec(5, []byte{1, 0x00, 1, 0}))},
		// Big (0), small (1), and a component (2) aliasing the outer big
		// one and instantiating it; index 2 instantiated.
		{"outer alias of a component", comp(sec(4, big), sec(4, small), sec(4, comp(sec(6, []byte{1, 0x04, 0x02, 1, 0}), sec(5, []byte{1, 0x00, 0, 0}))), sec(5, []byte{1, 0x00, 2, 0}))},
	} {
		st, err := wasmscan.Scan(tc.b)
		if err != nil || st.Globals != 1000 || st.CoreInstances != 1 {
			t.Errorf("%s: %d globals in %d instances (%v); want the big component's 1000 in 1", tc.name, st.Globals, st.CoreInstances, err)
		}
	}
}

// TestHostBytesSaturate: a table whose initial size is near 2^64 (a u64
// in the table64 encoding) charges the most host memory there is, never a
// product that wrapped around to something small.
func TestHostBytesSaturate(t *testing.T) {
	mod := append([]byte("\x00asm\x01\x00\x00\x00"), sec(4, uleb([]byte{1, 0x70, 0x04}, 1<<61))...)
	st, err := wasmscan.Scan(comp(sec(1, mod), coreInst(0, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if st.TableElements != 1<<61 || st.HostBytes != ^uint64(0) {
		t.Fatalf("%d table elements, %d host bytes; want 2^61 and the host bytes saturated", st.TableElements, st.HostBytes)
	}
	if err := wasmscan.DefaultLimits.Check(st.Totals); !errors.Is(err, wasmscan.ErrLimit) || !strings.Contains(err.Error(), "more than 16 EiB of host memory by estimate") {
		t.Fatalf("Check = %v; want the host memory over its limit, as more than 16 EiB", err)
	}
}

// TestExportsRefusesAMalformedExportSection: Exports (how a worker's
// parent and maiden build tell a tool from a middleware without compiling
// it) refuses an export section that does not decode, or holds bytes
// after its last export, rather than answering with the names it read.
func TestExportsRefusesAMalformedExportSection(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		msg  string
	}{
		{"bytes after the last export", comp(sec(11, []byte{1, 0x00, 7, 'e', 'x', 'e', 'c', 'u', 't', 'e', 0x01, 0, 0x00, 0xaa})), "1 bytes left over at the end of component export section"},
		{"an export of an unknown sort", comp(sec(11, []byte{2, 0x00, 7, 'e', 'x', 'e', 'c', 'u', 't', 'e', 0x01, 0, 0x00, 0x00, 1, 'h', 0x09, 0, 0x00})), "unknown sort 0x09"},
	} {
		names, err := wasmscan.Exports(tc.b)
		if !errors.Is(err, wasmscan.ErrMalformed) || !strings.Contains(err.Error(), tc.msg) || names != nil {
			t.Errorf("%s: Exports = %q, %v; want no names and ErrMalformed saying %q", tc.name, names, err, tc.msg)
		}
	}
}
