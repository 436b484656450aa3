package wasmsnap

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// builder assembles small modules section by section.
type builder struct{ m module }

func (b *builder) add(id byte, body ...byte) *builder {
	b.m.sections = append(b.m.sections, section{id, body})
	return b
}

func (b *builder) bytes() []byte { return b.m.encode() }

func str(s string) []byte { return append(appendU32(nil, uint32(len(s))), s...) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// probeModule imports clock_time_get and random_get (and an unrelated
// function), and defines "run" which calls each of them. Index 0 is the
// unrelated import, 1 clock_time_get, 2 random_get, 3 run.
func probeModule() []byte {
	var b builder
	b.add(secType, cat([]byte{3},
		[]byte{0x60, 3, 0x7f, 0x7e, 0x7f, 1, 0x7f}, // 0: clock_time_get
		[]byte{0x60, 2, 0x7f, 0x7f, 1, 0x7f},       // 1: random_get
		[]byte{0x60, 0, 0})...)                     // 2: () -> ()
	b.add(secImport, cat([]byte{3},
		str("env"), str("other"), []byte{0, 2},
		str(wasiModule), str("clock_time_get"), []byte{0, 0},
		str(wasiModule), str("random_get"), []byte{0, 1})...)
	b.add(secFunction, 1, 2)
	b.add(secGlobal, 1, 0x7f, 0x01, 0x41, 0x05, 0x0b)
	b.add(secExport, cat([]byte{1}, str("run"), []byte{0, 3})...)
	body := []byte{0, // no locals
		0x10, 0, // call other
		0x41, 0, 0x42, 0, 0x41, 8, 0x10, 1, 0x1a, // clock_time_get(0, 0, 8); drop
		0x41, 0, 0x41, 4, 0x10, 2, 0x1a, // random_get(0, 4); drop
		0x0b}
	b.add(secCode, cat([]byte{1}, appendU32(nil, uint32(len(body))), body)...)
	return b.bytes()
}

func TestInstrument(t *testing.T) {
	out, probe, err := Instrument(probeModule())
	if err != nil {
		t.Fatal(err)
	}
	if probe.Imports != 2 || probe.WallClock != 1 || probe.Random != 2 || probe.GoRand != 3 {
		t.Fatalf("probe %+v, want 2 imports and counters at globals 1, 2 and 3", probe)
	}
	m, err := parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := m.vecCount(secFunction); n != 3 {
		t.Errorf("%d defined functions, want run and two counters", n)
	}
	code := m.sections[m.find(secCode)].body
	r := &reader{b: code}
	if n := r.u32(); n != 3 {
		t.Fatalf("%d bodies", n)
	}
	run := r.bytes(int(r.u32()))
	// The unrelated import is still called directly; the WASI ones through
	// the counters (functions 4 and 5).
	for _, want := range [][]byte{{0x10, 0}, {0x10, 4}, {0x10, 5}} {
		if !bytes.Contains(run, want) {
			t.Errorf("run's body % x lacks call % x", run, want)
		}
	}
	if bytes.Contains(run, []byte{0x10, 1}) || bytes.Contains(run, []byte{0x10, 2}) {
		t.Errorf("run still calls a WASI import directly: % x", run)
	}
	clock := r.bytes(int(r.u32()))
	if !bytes.HasSuffix(clock, []byte{0x20, 0, 0x20, 1, 0x20, 2, 0x10, 1, 0x0b}) {
		t.Errorf("the clock counter does not forward its arguments to import 1: % x", clock)
	}
	// Counts reads the counters' initialisers, as wizer leaves them.
	globals := m.sections[m.find(secGlobal)].body
	if !bytes.Equal(globals, []byte{4, 0x7f, 1, 0x41, 5, 0x0b, 0x7f, 1, 0x41, 0, 0x0b, 0x7f, 1, 0x41, 0, 0x0b, 0x7f, 1, 0x41, 0, 0x0b}) {
		t.Fatalf("globals % x", globals)
	}
	m.sections[m.find(secGlobal)].body = []byte{4, 0x7f, 1, 0x41, 5, 0x0b, 0x7f, 1, 0x41, 3, 0x0b, 0x7f, 1, 0x41, 0xc0, 0x00, 0x0b, 0x7f, 1, 0x41, 2, 0x0b}
	c, err := probe.Counts(m.encode())
	if err != nil {
		t.Fatal(err)
	}
	if c != (Counts{WallClock: 3, Random: 64, GoRand: 2}) {
		t.Errorf("counts %+v, want 3, 64 and 2", c)
	}
}

func TestInstrumentNothingToDo(t *testing.T) {
	var b builder
	b.add(secType, 1, 0x60, 0, 0)
	b.add(secFunction, 1, 0)
	b.add(secCode, 1, 2, 0, 0x0b)
	in := b.bytes()
	out, probe, err := Instrument(in)
	if err != nil || probe.Imports != 0 || !bytes.Equal(in, out) {
		t.Errorf("a module without WASI imports: %v, %+v, changed %v", err, probe, !bytes.Equal(in, out))
	}
	// No name section (a Go build with -ldflags=-s): math/rand draws
	// cannot be counted, and the probe says so (maiden build then does
	// not snapshot).
	if probe.GoRandCounted {
		t.Error("GoRandCounted without a name section naming runtime.rand")
	}
}

func TestRewriteBody(t *testing.T) {
	redirect := map[uint32]uint32{1: 300}
	for _, tt := range []struct {
		name      string
		body, out []byte
		err       string
	}{
		{"wider index", []byte{0, 0x10, 1, 0x0b}, []byte{0, 0x10, 0xac, 0x02, 0x0b}, ""},
		{"return_call", []byte{0, 0x12, 1, 0x0b}, []byte{0, 0x12, 0xac, 0x02, 0x0b}, ""},
		{"other call kept", []byte{0, 0x10, 2, 0x0b}, nil, ""},
		{"locals, memarg with a long offset, consts", []byte{1, 2, 0x7f,
			0x41, 0x80, 0x01, 0x28, 2, 0x80, 0x80, 0x04, 0x42, 0x7f, 0x44, 1, 2, 3, 4, 5, 6, 7, 8,
			0x02, 0x40, 0x10, 1, 0x0b, 0x0e, 2, 0, 0, 0, 0xfc, 10, 0, 0, 0x0b},
			[]byte{1, 2, 0x7f,
				0x41, 0x80, 0x01, 0x28, 2, 0x80, 0x80, 0x04, 0x42, 0x7f, 0x44, 1, 2, 3, 4, 5, 6, 7, 8,
				0x02, 0x40, 0x10, 0xac, 0x02, 0x0b, 0x0e, 2, 0, 0, 0, 0xfc, 10, 0, 0, 0x0b}, ""},
		{"a call hidden in an immediate is not a call", []byte{0, 0x41, 0x10, 0x1a, 0x0b}, nil, ""},
		{"SIMD refused", []byte{0, 0xfd, 0, 0x0b}, nil, "not supported"},
		{"ref.func of an import refused", []byte{0, 0xd2, 1, 0x1a, 0x0b}, nil, "ref.func"},
		{"truncated", []byte{0, 0x41}, nil, "unexpected end"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rewriteBody(tt.body, redirect)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.out
			if want == nil {
				want = tt.body
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got % x\nwant % x", got, want)
			}
		})
	}
}

// dataModule has one memory and the given data section body.
func dataModule(data []byte, dataCount bool) []byte {
	var b builder
	b.add(5, 1, 0, 1) // memory section: min 1 page
	if dataCount {
		n := (&reader{b: data}).u32()
		b.add(secDataCount, appendU32(nil, n)...)
	}
	b.add(secData, data...)
	return b.bytes()
}

func active(off uint32, data string) []byte {
	return cat([]byte{0, 0x41}, appendS64(nil, int64(int32(off))), []byte{0x0b}, str(data))
}

func TestCoalesce(t *testing.T) {
	segs := [][]byte{active(100, "cc"), active(0, "aa"), active(4, "bb"), active(5000, "dd")}
	in := dataModule(cat(append([][]byte{{4}}, segs...)...), true)
	for _, tt := range []struct {
		gap      int
		segments int
	}{{-1, 4}, {0, 4}, {2, 3}, {96, 2}, {5000, 1}} {
		out, err := Coalesce(in, tt.gap)
		if err != nil {
			t.Fatal(err)
		}
		st, err := Stats(out)
		if err != nil {
			t.Fatal(err)
		}
		if st.Segments != tt.segments {
			t.Errorf("gap %d: %d segments, want %d", tt.gap, st.Segments, tt.segments)
		}
		a, _ := Image(in)
		b, err := Image(out)
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("gap %d: the memory image changed (%v)", tt.gap, err)
		}
		m, _ := parse(out)
		if n, _ := m.vecCount(secDataCount); int(n) != st.Segments {
			t.Errorf("gap %d: data count %d, segments %d", tt.gap, n, st.Segments)
		}
	}

	// Left alone: overlapping segments (order decides), a passive segment
	// (addressed by index).
	for name, data := range map[string][]byte{
		"overlap": cat([]byte{2}, active(0, "aaaa"), active(2, "bb")),
		"passive": cat([]byte{2}, active(0, "aa"), []byte{1}, str("pp")),
	} {
		in := dataModule(data, false)
		out, err := Coalesce(in, 1<<20)
		if err != nil || !bytes.Equal(in, out) {
			t.Errorf("%s: changed the module (%v)", name, err)
		}
	}
}

func TestExports(t *testing.T) {
	var b builder
	b.add(secType, 1, 0x60, 0, 0)
	b.add(secFunction, 2, 0, 0)
	b.add(secExport, cat([]byte{3}, str("_initialize"), []byte{0, 0}, str("restore"), []byte{0, 1}, str("memory"), []byte{2, 0})...)
	b.add(secCode, 2, 2, 0, 0x0b, 2, 0, 0x0b)
	in := b.bytes()

	out, err := SetExport(in, "_initialize", "restore")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := parse(out)
	es, _ := m.exports()
	if want := []export{{"_initialize", 0, 1}, {"memory", 2, 0}}; !slices.Equal(es, want) {
		t.Errorf("exports %v, want %v", es, want)
	}
	if _, err := SetExport(in, "_initialize", "nope"); err == nil {
		t.Error("SetExport from a missing export succeeded")
	}

	out, err = RemoveExport(in, "restore")
	if err != nil {
		t.Fatal(err)
	}
	names, _ := Exports(out)
	if !slices.Equal(names, []string{"_initialize", "memory"}) {
		t.Errorf("after RemoveExport: %q", names)
	}
	if same, _ := RemoveExport(in, "nope"); !bytes.Equal(same, in) {
		t.Error("RemoveExport of a missing export changed the module")
	}
}

func TestParseRefusesGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("\x00asm\x02\x00\x00\x00"), []byte("\x00asm\x01\x00\x00\x00\x01\x05\x00")} {
		if _, err := parse(b); err == nil {
			t.Errorf("parse(% x) succeeded", b)
		}
	}
}

// TestInstrumentGoRand: calls to runtime.rand are counted only from
// math/rand's and math/rand/v2's functions (by the name section), not from
// the runtime or other packages (map iteration, hash seeds).
func TestInstrumentGoRand(t *testing.T) {
	var b builder
	b.add(secType, cat([]byte{2},
		[]byte{0x60, 2, 0x7f, 0x7f, 1, 0x7f}, // 0: random_get
		[]byte{0x60, 1, 0x7f, 1, 0x7f})...)   // 1: Go's (i32) -> i32
	b.add(secImport, cat([]byte{1}, str(wasiModule), str("random_get"), []byte{0, 0})...)
	b.add(secFunction, 4, 1, 1, 1, 1)
	rnd := []byte{0, 0x41, 0, 0x0b}                            // 1: runtime.rand
	caller := []byte{0, 0x41, 0, 0x10, 1, 0x1a, 0x41, 0, 0x0b} // calls function 1
	b.add(secCode, cat([]byte{4},
		appendU32(nil, uint32(len(rnd))), rnd,
		appendU32(nil, uint32(len(caller))), caller, // 2: math/rand/v2.Uint64
		appendU32(nil, uint32(len(caller))), caller, // 3: internal/runtime/maps.rand
		appendU32(nil, uint32(len(caller))), caller, // 4: main.init
	)...)
	names := cat([]byte{5},
		[]byte{0}, str("wasi.random_get"),
		[]byte{1}, str("runtime.rand"),
		[]byte{2}, str("math_rand_v2.Uint64"),
		[]byte{3}, str("internal_runtime_maps.rand"),
		[]byte{4}, str("main.init"))
	b.add(secCustom, cat(str("name"), []byte{1}, appendU32(nil, uint32(len(names))), names)...)
	out, probe, err := Instrument(b.bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !probe.GoRandCounted {
		t.Error("runtime.rand is named, yet its draws are not counted")
	}
	m, _ := parse(out)
	r := &reader{b: m.sections[m.find(secCode)].body}
	if n := r.u32(); n != 6 {
		t.Fatalf("%d bodies, want 4 and two counters", n)
	}
	var bodies [][]byte
	for range 6 {
		bodies = append(bodies, r.bytes(int(r.u32())))
	}
	// Function 5 counts random_get, 6 counts runtime.rand.
	if !bytes.Contains(bodies[1], []byte{0x10, 6}) {
		t.Errorf("math/rand/v2's call is not counted: % x", bodies[1])
	}
	for i, name := range map[int]string{2: "the runtime's map iteration", 3: "main.init"} {
		if !bytes.Equal(bodies[i], caller) {
			t.Errorf("%s's call was redirected: % x", name, bodies[i])
		}
	}
	if want := []byte{0, 0x23, byte(probe.GoRand), 0x41, 1, 0x6a, 0x24, byte(probe.GoRand), 0x20, 0, 0x10, 1, 0x0b}; !bytes.Equal(bodies[5], want) {
		t.Errorf("the runtime.rand counter is % x, want % x", bodies[5], want)
	}
}

// TestMemoryMax: the one memory's maximum is read and set (the minimum
// kept), removed again, and a minimum above the maximum asked, two
// memories or no memory at all are errors.
func TestMemoryMax(t *testing.T) {
	var b builder
	b.add(secMemory, 1, 0, 3) // min 3, no maximum
	plain := b.bytes()
	if max, has, err := MemoryMax(plain); err != nil || has || max != 0 {
		t.Fatalf("MemoryMax of a memory with none: %d %v %v", max, has, err)
	}
	capped, err := SetMemoryMax(plain, 16384, true)
	if err != nil {
		t.Fatal(err)
	}
	if max, has, err := MemoryMax(capped); err != nil || !has || max != 16384 {
		t.Fatalf("after SetMemoryMax(16384): %d %v %v", max, has, err)
	}
	m, _ := parse(capped)
	if min, _, _, _ := m.memory(); min != 3 {
		t.Fatalf("the minimum became %d, want 3", min)
	}
	back, err := SetMemoryMax(capped, 0, false)
	if err != nil || !bytes.Equal(back, plain) {
		t.Fatalf("the maximum removed again: %x %v, want %x", back, err, plain)
	}
	if _, err := SetMemoryMax(plain, 2, true); err == nil || !strings.Contains(err.Error(), "minimum of 3 pages is above the maximum of 2") {
		t.Fatalf("a maximum below the minimum: %v", err)
	}
	var two builder
	two.add(secMemory, 2, 0, 1, 0, 1)
	if _, _, err := MemoryMax(two.bytes()); err == nil || !strings.Contains(err.Error(), "2 memories") {
		t.Fatalf("two memories: %v", err)
	}
	var none builder
	none.add(secType, 0)
	if _, _, err := MemoryMax(none.bytes()); err == nil || !strings.Contains(err.Error(), "no memory") {
		t.Fatalf("no memory: %v", err)
	}
}
