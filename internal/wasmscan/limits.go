// Package wasmscan reads a WebAssembly component binary and adds up the
// state its instantiation would create in the host (core instances, globals,
// tables, data and element segments, functions, imports, canonical
// definitions) and the compile work nested instantiation multiplies, without
// compiling or instantiating it, and refuses components over maiden's limits.
//
// This state lives outside linear memory, so the store's memory ceiling
// (memory_mb) does not see it: a 5 MB component that instantiates a module
// of a million globals a hundred times made wasmtime allocate 2.6 GB. The
// store's limits cap how many instances, tables and memories a call may
// create, but not how big each is; Check does, at load, before anything runs.
//
// The scanner is a bounded decoder of the component binary format (layer 1)
// and of the core sections that hold per-instance state; everything else is
// skipped by its length. It imports nothing of maiden and no cgo.
package wasmscan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Costs are the host bytes assumed per item of per-instance state, for
// Totals.HostBytes. They are wasmtime 39's own layout, taken at its worst
// (every item touched), and checked against resident memory measured on
// instantiation (go test ./internal/sandbox -run '^$' -bench InstanceState
// -benchtime 1x, one case per process):
//
//   - Global: one VMGlobalDefinition (16 bytes) in the instance context;
//     measured 16.0 bytes per global (100 instances of 100,000 globals).
//   - Function: one VMFuncRef (32 bytes) per function that escapes (exported,
//     in a table, ref.func), one VMFunctionImport (24 bytes) per imported
//     one. Measured ~0 for functions that do not escape; 32 is the bound.
//   - TableElement: one pointer (8 bytes) per initial element. wasmtime
//     reserves tables and fills funcref entries lazily, so instantiation
//     measured ~0 resident bytes even for a table an element segment fills;
//     a guest that touches every entry makes all 8 resident.
//   - Instance: the instance record, its context header and the store's
//     bookkeeping. Too small to see in resident memory next to the rest (1,000
//     empty instances: ~8 bytes each, all from already-resident heap); 8 KiB
//     is a deliberately generous allowance.
//   - Import: a VMTableImport or VMMemoryImport (24 bytes), smaller for a
//     global or tag; 24 for each.
//   - Canon: per canonical definition in each component instance, a
//     lowering record and a function reference (48 bytes); 64 for each.
//   - ElemEntry: active segments land in tables (counted there) and passive
//     ones stay in the shared module, so 0.
//
// Data segments are copied into linear memory, which memory_mb already
// charges, so they cost nothing here; Limits.DataBytes bounds them instead.
type Costs struct {
	Instance, Global, Function, Import, TableElement, ElemEntry, Canon uint64
}

// DefaultCosts is what Scan assumes.
var DefaultCosts = &Costs{Instance: 8 << 10, Global: 16, Function: 32, Import: 24, TableElement: 8, Canon: 64}

func (c *Costs) hostBytes(m *Module) uint64 {
	b := c.Instance
	b = add(b, mul(m.Globals, c.Global))
	b = add(b, mul(m.Functions, c.Function))
	b = add(b, mul(m.Imports, c.Import))
	b = add(b, mul(m.TableElements, c.TableElement))
	return add(b, mul(m.ElemEntries, c.ElemEntry))
}

// Limits bound the totals over every core instance one instantiation of a
// component creates. Zero means no limit.
type Limits struct {
	// CoreInstances, Tables and Memories match the store's own limits
	// (internal/wasmtime NewStore: 1,000, 20, 20), so a component that
	// could never instantiate is refused at load with a clear message.
	CoreInstances, Tables, Memories     uint64
	Globals, TableElements, ElemEntries uint64
	// Definitions bounds compile work rather than memory (see
	// Totals.Definitions).
	Definitions uint64
	DataBytes   uint64
	// HostBytes caps Totals.HostBytes: the host memory held per call
	// outside memory_mb, the "fixed allowance" a call may cost beyond its
	// memory ceiling.
	HostBytes uint64
}

// DefaultLimits are maiden's. Real tools sit far below them (the package
// tests scan every tool the repository builds): a standard Go tool (3.3-3.9
// MB) creates 4 core instances with 11 globals, ~6,500 table elements and an
// estimated 160 KiB of host state; a componentize-js tool (12 MB) 4 with 4
// globals, 7,717 table elements and ~490 KiB; the WAT fixtures 1-3 with one
// global each. The attack (100 instances of a million globals) is 100
// million globals and an estimated 1.5 GiB.
var DefaultLimits = Limits{
	CoreInstances: 1000,
	Tables:        20,
	Memories:      20,
	Globals:       1_000_000,
	TableElements: 4_000_000,
	ElemEntries:   4_000_000,
	Definitions:   1_000_000,
	DataBytes:     256 << 20,
	HostBytes:     64 << 20,
}

// ErrLimit is matched (errors.Is) by every *LimitError.
var ErrLimit = errors.New("per-instance state over the limits")

// LimitError says which limits a component's totals break.
type LimitError struct {
	Totals Totals
	// Instances is the limit on core instances when the component breaks
	// it, else 0.
	Instances uint64
	// Definitions is the limit on Totals.Definitions when the component
	// breaks it, else 0.
	Definitions uint64
	// Over lists each other broken limit, e.g. "100,000,000 globals in
	// total (maiden allows at most 1,000,000)".
	Over []string
}

func (e *LimitError) Error() string {
	var parts []string
	if e.Instances != 0 || len(e.Over) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "component creates %s core instance%s", commas(e.Totals.CoreInstances), plural(e.Totals.CoreInstances))
		if e.Instances != 0 {
			fmt.Fprintf(&b, " (maiden allows at most %s)", commas(e.Instances))
		}
		if len(e.Over) > 0 {
			b.WriteString(" holding ")
			b.WriteString(strings.Join(e.Over, ", "))
		}
		b.WriteString("; per-instance state is host memory outside memory_mb, so maiden bounds it at load")
		parts = append(parts, b.String())
	}
	if e.Definitions != 0 {
		parts = append(parts, fmt.Sprintf("component instantiates nested components so often that compiling it walks %s component-level definitions (maiden allows at most %s)",
			commas(e.Totals.Definitions), commas(e.Definitions)))
	}
	return strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Check returns a *LimitError listing every limit t breaks, or nil.
func (l Limits) Check(t Totals) error {
	var over []string
	count := func(got, limit uint64, what string) {
		if limit > 0 && got > limit {
			over = append(over, fmt.Sprintf("%s %s in total (maiden allows at most %s)", commas(got), what, commas(limit)))
		}
	}
	size := func(got, limit uint64, what string) {
		if limit > 0 && got > limit {
			over = append(over, fmt.Sprintf("%s %s (maiden allows at most %s)", bytesString(got), what, bytesString(limit)))
		}
	}
	var instances uint64
	if l.CoreInstances > 0 && t.CoreInstances > l.CoreInstances {
		instances = l.CoreInstances
	}
	count(t.Globals, l.Globals, "globals")
	count(t.Tables, l.Tables, "tables")
	count(t.TableElements, l.TableElements, "table elements")
	count(t.Memories, l.Memories, "memories")
	count(t.ElemEntries, l.ElemEntries, "element segment entries")
	size(t.DataBytes, l.DataBytes, "of data segments")
	size(t.HostBytes, l.HostBytes, "of host memory by estimate")
	var definitions uint64
	if l.Definitions > 0 && t.Definitions > l.Definitions {
		definitions = l.Definitions
	}
	if len(over) == 0 && instances == 0 && definitions == 0 {
		return nil
	}
	return &LimitError{Totals: t, Instances: instances, Definitions: definitions, Over: over}
}

// CheckLimits scans b and checks it against DefaultLimits. The error wraps
// ErrMalformed, ErrUnbounded or ErrLimit.
func CheckLimits(b []byte) error {
	st, err := Scan(b)
	if err != nil {
		return err
	}
	return DefaultLimits.Check(st.Totals)
}

// commas formats n with thousands separators: 100,000,000.
func commas(n uint64) string {
	if n == ^uint64(0) {
		return "more than 18 quintillion"
	}
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func plural(n uint64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func bytesString(n uint64) string {
	switch {
	case n == ^uint64(0):
		return "more than 16 EiB"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
