package wasmsnap

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// noPanic runs f and turns a panic into an error.
func noPanic(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f()
}

// TestMutation39ParseShortOrLongNumbers: a header shorter than 8 bytes, a
// section size encoded in more than 5 bytes or above 2^32-1 are refused,
// without a panic.
func TestMutation39ParseShortOrLongNumbers(t *testing.T) {
	hdr := "\x00asm\x01\x00\x00\x00"
	for name, b := range map[string]string{
		"4-byte header":            "\x00asm",
		"7-byte header":            "\x00asm\x01\x00\x00",
		"size in 6 bytes":          hdr + "\x00\x85\x80\x80\x80\x80\x00" + "\x01a\x00\x00\x00",
		"size of 2^32 in 5 bytes":  hdr + "\x00\x80\x80\x80\x80\x10",
		"size of 2^32+1 (5 bytes)": hdr + "\x00\x81\x80\x80\x80\x10" + "\x00",
	} {
		err := noPanic(func() error { _, err := parse([]byte(b)); return err })
		if err == nil || strings.Contains(err.Error(), "panic") {
			t.Errorf("parse of a module with a %s = %v; want refused", name, err)
		}
	}
}

// importsModule imports, before the two WASI functions, one thing of every
// other kind (a global, a table and a memory each with a maximum, a tag),
// and defines one global and "run", which calls both WASI imports.
// Functions: 0 clock_time_get, 1 random_get, 2 run. Globals: 0 imported,
// 1 defined.
func importsModule() []byte {
	var b builder
	b.add(secType, cat([]byte{3},
		[]byte{0x60, 3, 0x7f, 0x7e, 0x7f, 1, 0x7f},
		[]byte{0x60, 2, 0x7f, 0x7f, 1, 0x7f},
		[]byte{0x60, 0, 0})...)
	b.add(secImport, cat([]byte{6},
		str("env"), str("g"), []byte{0x03, 0x7f, 0x00}, // global i32 const
		str("env"), str("t"), []byte{0x01, 0x70, 0x01, 0x01, 0x02}, // table funcref 1..2
		str("env"), str("m"), []byte{0x02, 0x01, 0x01, 0x02}, // memory 1..2
		str("env"), str("e"), []byte{0x04, 0x00, 0x02}, // tag of type 2
		str(wasiModule), str("clock_time_get"), []byte{0, 0},
		str(wasiModule), str("random_get"), []byte{0, 1})...)
	b.add(secFunction, 1, 2)
	b.add(secGlobal, 1, 0x7f, 0x01, 0x41, 0x05, 0x0b)
	body := []byte{0, 0x41, 0, 0x42, 0, 0x41, 8, 0x10, 0, 0x1a, 0x41, 0, 0x41, 4, 0x10, 1, 0x1a, 0x0b}
	b.add(secCode, cat([]byte{1}, appendU32(nil, uint32(len(body))), body)...)
	return b.bytes()
}

// TestMutation39ImportKindsAndGlobals: imports of every kind are skipped
// exactly, so both WASI imports after them are redirected; the counters
// come after the imported and the defined globals, and Counts reads them
// there.
func TestMutation39ImportKindsAndGlobals(t *testing.T) {
	out, probe, err := Instrument(importsModule())
	if err != nil {
		t.Fatalf("Instrument after a global, table, memory and tag import: %v", err)
	}
	if probe.Imports != 2 || probe.WallClock != 2 || probe.Random != 3 || probe.GoRand != 4 {
		t.Fatalf("probe %+v; want 2 imports, counters at globals 2, 3 and 4 (after 1 imported and 1 defined)", probe)
	}
	m, _ := parse(out)
	r := &reader{b: m.sections[m.find(secCode)].body}
	r.u32()
	run := r.bytes(int(r.u32()))
	if !bytes.Contains(run, []byte{0x10, 3}) || !bytes.Contains(run, []byte{0x10, 4}) || bytes.Contains(run, []byte{0x10, 0}) || bytes.Contains(run, []byte{0x10, 1}) {
		t.Errorf("run's body % x; want calls to the counters 3 and 4 only", run)
	}
	// The snapshot's counters: wall clock 7, random 9, Go 11.
	m.sections[m.find(secGlobal)].body = []byte{4, 0x7f, 1, 0x41, 5, 0x0b, 0x7f, 1, 0x41, 7, 0x0b, 0x7f, 1, 0x41, 9, 0x0b, 0x7f, 1, 0x41, 11, 0x0b}
	c, err := probe.Counts(m.encode())
	if err != nil || c != (Counts{WallClock: 7, Random: 9, GoRand: 11}) {
		t.Errorf("Counts with one imported global = %+v, %v; want 7, 9 and 11", c, err)
	}
}

// TestMutation39BadTypesRefused: a WASI import or runtime.rand of a type
// index one past the type section, or a clock_time_get whose clock id is
// not an i32, is refused without a panic.
func TestMutation39BadTypesRefused(t *testing.T) {
	clockOfType := func(typ byte, params ...byte) []byte {
		var b builder
		b.add(secType, cat([]byte{1, 0x60}, appendU32(nil, uint32(len(params))), params, []byte{1, 0x7f})...)
		b.add(secImport, cat([]byte{1}, str(wasiModule), str("clock_time_get"), []byte{0, typ})...)
		b.add(secCode, 0)
		return b.bytes()
	}
	randOfType := func() []byte {
		var b builder
		b.add(secType, 1, 0x60, 2, 0x7f, 0x7f, 1, 0x7f)
		b.add(secImport, cat([]byte{1}, str(wasiModule), str("random_get"), []byte{0, 0})...)
		b.add(secFunction, 1, 1) // runtime.rand of type 1: there is no type 1
		b.add(secCode, 1, 3, 0, 0x01, 0x0b)
		names := cat([]byte{1}, []byte{1}, str("runtime.rand"))
		b.add(secCustom, cat(str("name"), []byte{1}, appendU32(nil, uint32(len(names))), names)...)
		return b.bytes()
	}
	for _, tt := range []struct {
		name, want string
		mod        []byte
	}{
		{"clock_time_get of type 1 of 1", "unknown type 1", clockOfType(1, 0x7f, 0x7e, 0x7f)},
		{"clock_time_get(i64, i64, i32)", "unexpected signature", clockOfType(0, 0x7e, 0x7e, 0x7f)},
		{"runtime.rand of type 1 of 1", "runtime.rand has an unknown type 1", randOfType()},
	} {
		err := noPanic(func() error { _, _, err := Instrument(tt.mod); return err })
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Instrument of %s = %v; want %q", tt.name, err, tt.want)
		}
	}
}

// TestMutation39ClockCounterIsRealtime: the clock wrapper adds one only when
// its clock id is 0 (realtime): local.get 0; i32.eqz; if; counter++; end.
func TestMutation39ClockCounterIsRealtime(t *testing.T) {
	out, probe, err := Instrument(probeModule())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := parse(out)
	r := &reader{b: m.sections[m.find(secCode)].body}
	r.u32()
	r.bytes(int(r.u32()))
	clock := r.bytes(int(r.u32()))
	g := byte(probe.WallClock)
	want := []byte{0, 0x20, 0, 0x45, 0x04, 0x40, 0x23, g, 0x41, 1, 0x6a, 0x24, g, 0x0b, 0x20, 0, 0x20, 1, 0x20, 2, 0x10, 1, 0x0b}
	if !bytes.Equal(clock, want) {
		t.Errorf("the clock counter is % x; want % x (counting clock id 0 only)", clock, want)
	}
}

// goRandModule is TestInstrumentGoRand's module with caller's name and,
// first in the name section, a module name subsection when modName.
func goRandModule(caller string, modName bool) []byte {
	var b builder
	b.add(secType, cat([]byte{2}, []byte{0x60, 2, 0x7f, 0x7f, 1, 0x7f}, []byte{0x60, 1, 0x7f, 1, 0x7f})...)
	b.add(secImport, cat([]byte{1}, str(wasiModule), str("random_get"), []byte{0, 0})...)
	b.add(secFunction, 2, 1, 1)
	rnd := []byte{0, 0x41, 0, 0x0b}
	call := []byte{0, 0x41, 0, 0x10, 1, 0x1a, 0x41, 0, 0x0b}
	b.add(secCode, cat([]byte{2}, appendU32(nil, uint32(len(rnd))), rnd, appendU32(nil, uint32(len(call))), call)...)
	names := cat([]byte{3}, []byte{0}, str("wasi.random_get"), []byte{1}, str("runtime.rand"), []byte{2}, str(caller))
	sec := str("name")
	if modName {
		mod := str("tool")
		sec = cat(sec, []byte{0}, appendU32(nil, uint32(len(mod))), mod)
	}
	sec = cat(sec, []byte{1}, appendU32(nil, uint32(len(names))), names)
	b.add(secCustom, sec...)
	return b.bytes()
}

// TestMutation39MathRandV1AndModuleName: math/rand's (v1) draws are counted
// as math/rand/v2's, and a module name subsection before the function names
// does not hide runtime.rand.
func TestMutation39MathRandV1AndModuleName(t *testing.T) {
	for _, tt := range []struct {
		caller  string
		modName bool
	}{{"math_rand.Int63", false}, {"math_rand_v2.Uint64", true}} {
		out, probe, err := Instrument(goRandModule(tt.caller, tt.modName))
		if err != nil {
			t.Fatal(err)
		}
		m, _ := parse(out)
		r := &reader{b: m.sections[m.find(secCode)].body}
		r.u32()
		r.bytes(int(r.u32()))
		caller := r.bytes(int(r.u32()))
		if !probe.GoRandCounted || !bytes.Contains(caller, []byte{0x10, 4}) {
			t.Errorf("%s (module name subsection %v): counted %v, body % x; want its runtime.rand call through counter 4", tt.caller, tt.modName, probe.GoRandCounted, caller)
		}
	}
}

// TestMutation39OtherModulesClock: a clock_time_get imported from a module
// other than WASI's is not redirected.
func TestMutation39OtherModulesClock(t *testing.T) {
	var b builder
	b.add(secType, 1, 0x60, 3, 0x7f, 0x7e, 0x7f, 1, 0x7f)
	b.add(secImport, cat([]byte{1}, str("env"), str("clock_time_get"), []byte{0, 0})...)
	b.add(secFunction, 1, 0)
	body := []byte{0, 0x41, 0, 0x42, 0, 0x41, 0, 0x10, 0, 0x0b}
	b.add(secCode, cat([]byte{1}, appendU32(nil, uint32(len(body))), body)...)
	in := b.bytes()
	out, probe, err := Instrument(in)
	if err != nil || probe.Imports != 0 || !bytes.Equal(out, in) {
		t.Errorf("Instrument of env.clock_time_get: %v, %d imports redirected, changed %v; want none", err, probe.Imports, !bytes.Equal(out, in))
	}
}

// TestMutation39CountsReadsConstsOnly: a counter whose initialiser is not a
// constant, or a global initialiser of two instructions, is an error (no
// panic, no value read out of step).
func TestMutation39CountsReadsConstsOnly(t *testing.T) {
	out, probe, err := Instrument(probeModule())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := parse(out)
	for _, tt := range []struct {
		globals []byte
		want    string
	}{
		{[]byte{4, 0x7f, 1, 0x41, 5, 0x0b, 0x7f, 1, 0x41, 3, 0x0b, 0x7f, 1, 0x23, 0, 0x0b, 0x7f, 1, 0x41, 2, 0x0b}, "no counter global 2"},
		{[]byte{4, 0x7f, 1, 0x41, 5, 0x41, 6, 0x6a, 0x0b, 0x7f, 1, 0x41, 3, 0x0b, 0x7f, 1, 0x41, 4, 0x0b, 0x7f, 1, 0x41, 2, 0x0b}, "more than one instruction"},
	} {
		m.sections[m.find(secGlobal)].body = tt.globals
		var c Counts
		err := noPanic(func() (err error) { c, err = probe.Counts(m.encode()); return err })
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Counts of globals % x = %+v, %v; want %q", tt.globals, c, err, tt.want)
		}
	}
}

// TestMutation39ImmediatesKeepStep: every instruction's immediates are read
// exactly, so a call right after one is still found (each case hides the
// call from a reader one immediate short: the next byte, 0x0c, would be
// read as br and eat the call's opcode).
func TestMutation39ImmediatesKeepStep(t *testing.T) {
	redirect := map[uint32]uint32{1: 300}
	for name, pre := range map[string][]byte{
		"br_table of no labels, default 12":    {0x0e, 0, 0x0c},
		"call_indirect of table 12":            {0x11, 0, 0x0c},
		"i32.load of memory 1, offset 12":      {0x41, 0, 0x28, 0x42, 1, 0x0c},
		"table.copy 0 12":                      {0xfc, 14, 0, 0x0c},
		"memory.init 0 12":                     {0x41, 0, 0x41, 0, 0x41, 0, 0xfc, 8, 0, 0x0c},
		"i64.store32":                          {0x41, 0, 0x42, 0, 0x3e, 2, 0},
		"table.get 0, table.set 0":             {0x41, 0, 0x25, 0, 0x1a, 0x41, 0, 0xd0, 0x70, 0x26, 0},
		"i32.load of memory 0, offset 12 only": {0x41, 0, 0x28, 2, 0x0c},
	} {
		body := cat([]byte{0}, pre, []byte{0x10, 1, 0x0b})
		want := cat([]byte{0}, pre, []byte{0x10, 0xac, 0x02, 0x0b})
		got, err := rewriteBody(body, redirect)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s then call 1: % x, %v; want % x (the call redirected)", name, got, err, want)
		}
	}
}

// TestMutation39CodeTrailingBytes: bytes after the code section's last
// body are an error, not dropped.
func TestMutation39CodeTrailingBytes(t *testing.T) {
	m, _ := parse(probeModule())
	ci := m.find(secCode)
	m.sections[ci].body = append(m.sections[ci].body, 0x0b)
	if _, _, err := Instrument(m.encode()); err == nil || !strings.Contains(err.Error(), "trailing bytes") {
		t.Errorf("Instrument of a code section with a trailing byte = %v; want refused", err)
	}
}

// TestMutation39CoalesceLeavesOthersAlone: a passive segment, a segment of
// memory 1 and one at a computed offset leave the module unchanged even
// when they would not overlap the others at offset 0, and Image refuses
// such a module.
func TestMutation39CoalesceLeavesOthersAlone(t *testing.T) {
	for name, seg := range map[string][]byte{
		"passive":           cat([]byte{1}, str("pp")),
		"memory 1":          cat([]byte{2, 1, 0x41, 10, 0x0b}, str("mm")),
		"global.get offset": cat([]byte{0, 0x23, 0, 0x0b}, str("gg")),
		"i64.const offset":  cat([]byte{0, 0x42, 10, 0x0b}, str("ii")),
	} {
		in := dataModule(cat([]byte{2}, active(100, "aa"), seg), false)
		out, err := Coalesce(in, 1<<20)
		if err != nil || !bytes.Equal(in, out) {
			st, _ := Stats(out)
			t.Errorf("Coalesce with a %s segment: %d segments, %v; want the module unchanged", name, st.Segments, err)
		}
		if img, err := Image(in); err == nil {
			t.Errorf("Image with a %s segment = % x; want refused", name, img)
		}
	}
	// Memory 0 named by flags 2 is merged.
	in := dataModule(cat([]byte{2}, active(0, "aa"), []byte{2, 0, 0x41, 2, 0x0b}, str("bb")), false)
	if st, _ := Stats(mustCoalesce(t, in, 0)); st.Segments != 1 {
		t.Errorf("segments of memory 0 by flags 0 and 2: %d after Coalesce, want 1", st.Segments)
	}
}

func mustCoalesce(t *testing.T, in []byte, gap int) []byte {
	t.Helper()
	out, err := Coalesce(in, gap)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMutation39CoalesceOverlapByOne: segments overlapping by one byte are
// left in their order (the later one wins the shared byte).
func TestMutation39CoalesceOverlapByOne(t *testing.T) {
	in := dataModule(cat([]byte{2}, active(2, "bb"), active(0, "aaa")), false)
	out := mustCoalesce(t, in, 16)
	img, err := Image(out)
	if err != nil || string(img) != "aaab" || !bytes.Equal(in, out) {
		t.Errorf("Coalesce of bb at 2, then aaa at 0: image %q, %v; want \"aaab\" and the module unchanged", img, err)
	}
}

// TestMutation39CoalesceGapBound: a gap one byte wider than maxGap is not
// filled.
func TestMutation39CoalesceGapBound(t *testing.T) {
	in := dataModule(cat([]byte{2}, active(0, "aa"), active(4, "bb")), false)
	for gap, want := range map[int]int{1: 2, 2: 1} {
		if st, _ := Stats(mustCoalesce(t, in, gap)); st.Segments != want {
			t.Errorf("segments 2 bytes apart, maxGap %d: %d segments, want %d", gap, st.Segments, want)
		}
	}
}

// TestMutation39CoalesceHighOffsets: offsets at or above 2^31 are written
// back as the i32.const the engine reads (a negative s32), unchanged.
func TestMutation39CoalesceHighOffsets(t *testing.T) {
	in := dataModule(cat([]byte{2}, active(0x80000000, "aa"), active(0x80000004, "bb")), false)
	out := mustCoalesce(t, in, 2)
	m, _ := parse(out)
	r := &reader{b: m.sections[m.find(secData)].body}
	n, flags, op := r.u32(), r.u32(), r.byte()
	off := r.sleb()
	if r.err != nil || n != 1 || flags != 0 || op != 0x41 || off != -0x80000000 {
		t.Errorf("Coalesce of segments at 2^31 and 2^31+4: %d segments, offset i32.const %d (%v); want 1 at %d", n, off, r.err, -0x80000000)
	}
}

// TestMutation39OffsetOneInstruction: an offset expression of more than
// one instruction is an error.
func TestMutation39OffsetOneInstruction(t *testing.T) {
	in := dataModule(cat([]byte{2}, []byte{0, 0x41, 0, 0x41, 4, 0x6a, 0x0b}, str("xx"), active(100, "aa")), false)
	if _, err := Coalesce(in, 16); err == nil || !strings.Contains(err.Error(), "more than one instruction") {
		t.Errorf("Coalesce of an offset i32.const 0; i32.const 4; i32.add = %v; want refused", err)
	}
}

// TestMutation39MemoryShapes: no memory in a memory section, a shared
// memory, trailing bytes are errors; a maximum of 0 is a maximum.
func TestMutation39MemoryShapes(t *testing.T) {
	for _, tt := range []struct {
		body []byte
		want string
	}{{[]byte{0, 0, 1}, "0 memories"}, {[]byte{1, 3, 1, 2}, "shared"}, {[]byte{1, 0, 1, 0x55}, "trailing"}} {
		var b builder
		b.add(secMemory, tt.body...)
		if _, _, err := MemoryMax(b.bytes()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("MemoryMax of a memory section % x = %v; want %q", tt.body, err, tt.want)
		}
	}
	var b builder
	b.add(secMemory, 1, 0, 0)
	capped, err := SetMemoryMax(b.bytes(), 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if max, has, err := MemoryMax(capped); max != 0 || !has || err != nil {
		t.Errorf("after SetMemoryMax(0): %d, %v, %v; want a maximum of 0", max, has, err)
	}
}

// TestMutation39SetExportFromFunctionOnly: the export moved must be a
// function.
func TestMutation39SetExportFromFunctionOnly(t *testing.T) {
	var b builder
	b.add(secType, 1, 0x60, 0, 0)
	b.add(secFunction, 1, 0)
	b.add(secExport, cat([]byte{2}, str("_initialize"), []byte{0, 0}, str("memory"), []byte{2, 0})...)
	b.add(secCode, 1, 2, 0, 0x0b)
	if out, err := SetExport(b.bytes(), "_initialize", "memory"); err == nil {
		names, _ := Exports(out)
		t.Errorf("SetExport from the memory export = %q, <nil>; want refused", names)
	}
}

// TestMutation39ClaimedCountCostsNothing: an export section that claims a
// million exports and holds none is refused without a million entries'
// work (a loop that stopped only at the count).
func TestMutation39ClaimedCountCostsNothing(t *testing.T) {
	var b builder
	b.add(secExport, appendU32(nil, 1<<20)...)
	in := b.bytes()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Exports(in)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Error("Exports of a section claiming 2^20 exports and holding none succeeded")
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("Exports of a section claiming 2^20 exports allocated %d bytes; want the count never trusted past the bytes", n)
	}
}

// TestMutation39LocalsKeepStep: each locals entry is a count and a type;
// a reader that took only the counts would read the second entry (68 i32)
// as f64.const, whose 8 bytes eat the call that follows.
func TestMutation39LocalsKeepStep(t *testing.T) {
	body := []byte{2, 1, 0x7f, 68, 0x7f, 0x10, 1, 1, 1, 1, 1, 1, 0x0b}
	want := []byte{2, 1, 0x7f, 68, 0x7f, 0x10, 0xac, 0x02, 1, 1, 1, 1, 1, 0x0b}
	got, err := rewriteBody(body, map[uint32]uint32{1: 300})
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("locals (1 i32) (68 i32) then call 1: % x, %v; want % x (the call redirected)", got, err, want)
	}
}
