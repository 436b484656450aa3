package wasmsnap

import (
	"errors"
	"fmt"
	"maps"
	"strings"
)

func merged(a, b map[uint32]uint32) map[uint32]uint32 {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

// Probe says where Instrument keeps its counts; Counts reads them from the
// snapshot wizer wrote.
type Probe struct {
	// The global indices of the counters.
	WallClock, Random, GoRand uint32
	// Imports counts the WASI imports that were redirected through a counter.
	Imports int
	// GoRandCounted is false when the module has no name section naming
	// runtime.rand (a Go build with -ldflags=-s strips it): math/rand draws
	// then cannot be counted, and Counts.GoRand stays 0 whatever init did.
	GoRandCounted bool
}

// Counts are the WASI reads a module made while it initialised.
type Counts struct {
	// WallClock is how many times it read the wall clock (clock_time_get
	// of the realtime clock, as time.Now does).
	WallClock uint32
	// Random is how many times it called random_get.
	Random uint32
	// GoRand is how many times math/rand or math/rand/v2 drew from Go's
	// runtime generator (runtime.rand, behind their top-level functions):
	// a value drawn while initialising is frozen into a snapshot although
	// no WASI call was made. Counted only in Go modules with a name section
	// whose math/rand packages were built with -gcflags=-l.
	GoRand uint32
}

const wasiModule = "wasi_snapshot_preview1"

// Instrument routes every call to the WASI imports clock_time_get and
// random_get through a small function that adds one to a counter (a
// global) and calls the import. The counters' values end up in the
// snapshot, where Counts finds them. Calls go through the counters at run
// time too, which costs a global increment per clock or random read.
func Instrument(core []byte) ([]byte, Probe, error) {
	m, err := parse(core)
	if err != nil {
		return nil, Probe{}, err
	}
	types, err := m.types()
	if err != nil {
		return nil, Probe{}, err
	}
	funcs, importedGlobals, err := m.imports()
	if err != nil {
		return nil, Probe{}, err
	}
	defined, err := m.vecCount(secFunction)
	if err != nil {
		return nil, Probe{}, fmt.Errorf("wasmsnap: function section: %w", err)
	}
	globals, err := m.vecCount(secGlobal)
	if err != nil {
		return nil, Probe{}, fmt.Errorf("wasmsnap: global section: %w", err)
	}
	probe := Probe{WallClock: importedGlobals + globals, Random: importedGlobals + globals + 1, GoRand: importedGlobals + globals + 2}

	// One wrapper per matching import, appended after the defined functions
	// so that no existing index moves.
	redirect := map[uint32]uint32{}
	var wrapperTypes, wrapperBodies [][]byte
	next := uint32(len(funcs)) + defined
	for _, f := range funcs {
		if f.module != wasiModule || (f.name != "clock_time_get" && f.name != "random_get") {
			continue
		}
		if int(f.typ) >= len(types) {
			return nil, Probe{}, fmt.Errorf("wasmsnap: import %s.%s has an unknown type %d", f.module, f.name, f.typ)
		}
		t := types[f.typ]
		var body []byte
		body = append(body, 0) // no locals
		if f.name == "clock_time_get" {
			if len(t.params) == 0 || t.params[0] != 0x7f {
				return nil, Probe{}, fmt.Errorf("wasmsnap: clock_time_get has an unexpected signature")
			}
			// if (clock_id == 0 /* realtime */) counter++
			body = append(body, 0x20, 0, 0x45, 0x04, 0x40)
			body = appendIncrement(body, probe.WallClock)
			body = append(body, 0x0b)
		} else {
			body = appendIncrement(body, probe.Random)
		}
		for p := range t.params {
			body = append(body, 0x20)
			body = appendU32(body, uint32(p))
		}
		body = append(body, 0x10)
		body = appendU32(body, f.index)
		body = append(body, 0x0b)
		redirect[f.index] = next
		next++
		wrapperTypes = append(wrapperTypes, appendU32(nil, f.typ))
		wrapperBodies = append(wrapperBodies, append(appendU32(nil, uint32(len(body))), body...))
	}
	probe.Imports = len(redirect)
	if len(redirect) == 0 {
		return core, probe, nil
	}

	// Go's runtime.rand, called from math/rand or math/rand/v2: through its
	// own wrapper, redirected only in the bodies of those packages'
	// functions. (Other callers draw for map iteration order and hash
	// seeds.) Build those packages with -gcflags=-l, or their top-level
	// functions are inlined into callers where this cannot tell them apart.
	names := m.functionNames()
	goRand, hasGoRand := uint32(0), false
	for idx, name := range names {
		if name == "runtime.rand" && idx >= uint32(len(funcs)) {
			goRand, hasGoRand = idx, true
		}
	}
	probe.GoRandCounted = hasGoRand
	var callerRedirect map[uint32]uint32
	if hasGoRand {
		typ, err := m.definedType(goRand - uint32(len(funcs)))
		if err != nil {
			return nil, Probe{}, err
		}
		if int(typ) >= len(types) {
			return nil, Probe{}, fmt.Errorf("wasmsnap: runtime.rand has an unknown type %d", typ)
		}
		body := appendIncrement([]byte{0}, probe.GoRand)
		for p := range types[typ].params {
			body = append(body, 0x20)
			body = appendU32(body, uint32(p))
		}
		body = append(body, 0x10)
		body = appendU32(body, goRand)
		body = append(body, 0x0b)
		callerRedirect = map[uint32]uint32{goRand: next}
		wrapperTypes = append(wrapperTypes, appendU32(nil, typ))
		wrapperBodies = append(wrapperBodies, append(appendU32(nil, uint32(len(body))), body...))
	}
	fromMathRand := func(idx uint32) bool {
		// Go's linker writes "math/rand/v2.Uint64" as "math_rand_v2.Uint64".
		name := strings.ReplaceAll(names[idx], "/", "_")
		return strings.HasPrefix(name, "math_rand.") || strings.HasPrefix(name, "math_rand_v2.")
	}

	// A reference to an import outside a call (an element segment putting
	// it in a table, for call_indirect; ref.func in a global's
	// initialiser) would reach it without the counter: refused, as ref.func
	// in code is. Go's linker makes neither.
	if err := m.checkNoReferences(redirect); err != nil {
		return nil, Probe{}, err
	}
	ci := m.find(secCode)
	if ci < 0 {
		return nil, Probe{}, errors.New("wasmsnap: the module has no code section")
	}
	both := merged(redirect, callerRedirect)
	code, err := rewriteCalls(m.sections[ci].body, func(k uint32) map[uint32]uint32 {
		if callerRedirect != nil && fromMathRand(uint32(len(funcs))+k) {
			return both
		}
		return redirect
	})
	if err != nil {
		return nil, Probe{}, err
	}
	m.sections[ci].body = code
	if err := m.appendToVec(secCode, wrapperBodies); err != nil {
		return nil, Probe{}, fmt.Errorf("wasmsnap: code section: %w", err)
	}
	if err := m.appendToVec(secFunction, wrapperTypes); err != nil {
		return nil, Probe{}, fmt.Errorf("wasmsnap: function section: %w", err)
	}
	counter := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b} // mut i32 = 0
	if err := m.appendToVec(secGlobal, [][]byte{counter, counter, counter}); err != nil {
		return nil, Probe{}, fmt.Errorf("wasmsnap: global section: %w", err)
	}
	return m.encode(), probe, nil
}

// checkNoReferences refuses a module whose element segments or global
// initialisers name a function of imports (the redirected WASI imports).
// A segment or initialiser this pass cannot read is refused too.
func (m *module) checkNoReferences(imports map[uint32]uint32) error {
	named := func(where string, f uint32) error {
		if _, ok := imports[f]; ok {
			return fmt.Errorf("wasmsnap: %s refers to a WASI clock or random import (function %d), whose calls through it this pass cannot count", where, f)
		}
		return nil
	}
	if i := m.find(secGlobal); i >= 0 {
		r := &reader{b: m.sections[i].body}
		n := r.u32()
		for k := uint32(0); k < n && r.err == nil; k++ {
			r.byte() // value type
			r.byte() // mutability
			if err := r.constExpr(func(f uint32) error { return named(fmt.Sprintf("global %d's initialiser", k), f) }); err != nil {
				return err
			}
		}
		if r.err != nil {
			return fmt.Errorf("wasmsnap: global section: %w", r.err)
		}
	}
	i := m.find(secElement)
	if i < 0 {
		return nil
	}
	r := &reader{b: m.sections[i].body}
	n := r.u32()
	for k := uint32(0); k < n && r.err == nil; k++ {
		where := fmt.Sprintf("element segment %d", k)
		ref := func(f uint32) error { return named(where, f) }
		flags := r.u32()
		if flags > 7 {
			return fmt.Errorf("wasmsnap: %s has flags %d, which this pass does not read", where, flags)
		}
		if flags == 2 || flags == 6 {
			r.u32() // table index
		}
		if flags&1 == 0 { // active: an offset
			if err := r.constExpr(ref); err != nil {
				return err
			}
		}
		if flags&3 != 0 {
			r.byte() // elemkind (0x00) or reference type
		}
		count := r.u32()
		for range count {
			if r.err != nil {
				break
			}
			if flags&4 == 0 {
				if err := ref(r.u32()); err != nil {
					return err
				}
			} else if err := r.constExpr(ref); err != nil {
				return err
			}
		}
	}
	if r.err == nil && r.i != len(r.b) {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return fmt.Errorf("wasmsnap: element section: %w", r.err)
	}
	return nil
}

// constExpr reads a constant expression up to its end, calling ref with
// every function ref.func names. An instruction a constant expression of
// this pass's proposals cannot hold is refused.
func (r *reader) constExpr(ref func(uint32) error) error {
	for r.err == nil {
		switch op := r.byte(); {
		case op == 0x0b:
			return nil
		case op == 0x41 || op == 0x42:
			r.sleb()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0x23: // global.get
			r.u32()
		case op == 0xd0: // ref.null
			r.byte()
		case op == 0xd2: // ref.func
			if f := r.u32(); r.err == nil {
				if err := ref(f); err != nil {
					return err
				}
			}
		case op == 0x6a || op == 0x6b || op == 0x6c || op == 0x7c || op == 0x7d || op == 0x7e: // extended constants
		default:
			if r.err == nil {
				return fmt.Errorf("wasmsnap: a constant expression holds opcode %#x, which this pass does not read", op)
			}
		}
	}
	return nil
}

func appendIncrement(b []byte, global uint32) []byte {
	b = append(b, 0x23)
	b = appendU32(b, global)
	b = append(b, 0x41, 0x01, 0x6a, 0x24)
	return appendU32(b, global)
}

// Counts reads the counters of p from a snapshot of a module Instrument
// returned (wizer writes each global's value as its initialiser).
func (p Probe) Counts(snapshot []byte) (Counts, error) {
	m, err := parse(snapshot)
	if err != nil {
		return Counts{}, err
	}
	_, importedGlobals, err := m.imports()
	if err != nil {
		return Counts{}, err
	}
	vals, err := m.globalConsts()
	if err != nil {
		return Counts{}, err
	}
	get := func(idx uint32) (uint32, error) {
		i := int(idx) - int(importedGlobals)
		if i < 0 || i >= len(vals) || vals[i] == nil {
			return 0, fmt.Errorf("wasmsnap: the snapshot has no counter global %d", idx)
		}
		return uint32(*vals[i]), nil
	}
	var c Counts
	if c.WallClock, err = get(p.WallClock); err != nil {
		return Counts{}, err
	}
	if c.Random, err = get(p.Random); err != nil {
		return Counts{}, err
	}
	if c.GoRand, err = get(p.GoRand); err != nil {
		return Counts{}, err
	}
	return c, nil
}

// globalConsts returns each defined global's initial value when it is an
// i32.const or i64.const, nil otherwise.
func (m *module) globalConsts() ([]*int64, error) {
	i := m.find(secGlobal)
	if i < 0 {
		return nil, nil
	}
	r := &reader{b: m.sections[i].body}
	n := r.u32()
	var out []*int64
	for k := uint32(0); k < n && r.err == nil; k++ {
		r.byte() // value type
		r.byte() // mutability
		var v *int64
		switch op := r.byte(); op {
		case 0x41, 0x42:
			x := r.sleb()
			v = &x
		case 0x43:
			r.bytes(4)
		case 0x44:
			r.bytes(8)
		case 0x23:
			r.u32()
		case 0xd0:
			r.byte()
		case 0xd2:
			r.u32()
		default:
			return nil, fmt.Errorf("wasmsnap: global %d has an initialiser this pass does not read (opcode %#x)", k, op)
		}
		if r.byte() != 0x0b {
			return nil, fmt.Errorf("wasmsnap: global %d has an initialiser of more than one instruction", k)
		}
		out = append(out, v)
	}
	if r.err != nil {
		return nil, fmt.Errorf("wasmsnap: global section: %w", r.err)
	}
	return out, nil
}

// rewriteCalls returns the code section with `call f` and `return_call f`
// of every f in redirectIn(k) calling redirectIn(k)[f] instead, in the body
// of the k-th defined function.
func rewriteCalls(code []byte, redirectIn func(k uint32) map[uint32]uint32) ([]byte, error) {
	r := &reader{b: code}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(code)+64), n)
	for k := uint32(0); k < n; k++ {
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("wasmsnap: code section, function body %d: %w", k, r.err)
		}
		nb, err := rewriteBody(body, redirectIn(k))
		if err != nil {
			return nil, fmt.Errorf("wasmsnap: function body %d: %w", k, err)
		}
		out = appendU32(out, uint32(len(nb)))
		out = append(out, nb...)
	}
	if r.i != len(code) {
		return nil, errors.New("wasmsnap: code section: trailing bytes")
	}
	return out, nil
}

func rewriteBody(body []byte, redirect map[uint32]uint32) ([]byte, error) {
	r := &reader{b: body}
	locals := r.u32()
	for range locals {
		r.u32()
		r.byte()
	}
	var out []byte // nil until the first change
	last := 0      // body[last:r.i] is not yet copied to out
	for r.i < len(body) && r.err == nil {
		op := r.byte()
		switch {
		case op == 0x10 || op == 0x12: // call, return_call
			at := r.i
			f := r.u32()
			if to, ok := redirect[f]; ok && r.err == nil {
				out = append(out, body[last:at]...)
				out = appendU32(out, to)
				last = r.i
			}
		case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
		case op >= 0x02 && op <= 0x04: // block, loop, if
			r.blockType()
		case op == 0x0c || op == 0x0d: // br, br_if
			r.u32()
		case op == 0x0e: // br_table
			for range r.u32() + 1 {
				r.u32()
			}
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			for range r.u32() {
				r.byte()
			}
		case op >= 0x20 && op <= 0x26: // locals, globals, table.get/set
			r.u32()
		case op >= 0x28 && op <= 0x3e: // loads and stores
			r.memarg()
		case op == 0x3f || op == 0x40: // memory.size, memory.grow
			r.u32()
		case op == 0x41 || op == 0x42:
			r.sleb()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op >= 0x45 && op <= 0xc4:
		case op == 0xd0:
			r.byte()
		case op == 0xd2: // ref.func
			if _, ok := redirect[r.u32()]; ok {
				return nil, errors.New("takes a reference to a WASI clock or random import (ref.func), which this pass cannot redirect")
			}
		case op == 0xfc:
			switch sub := r.u32(); {
			case sub <= 7:
			case sub == 8, sub == 12, sub == 14: // memory.init, table.init, table.copy
				r.u32()
				r.u32()
			case sub == 10: // memory.copy
				r.u32()
				r.u32()
			case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
				r.u32()
			default:
				return nil, fmt.Errorf("unknown instruction 0xfc %d", sub)
			}
		default:
			return nil, fmt.Errorf("instruction %#x is not supported by this pass (SIMD, threads, exceptions and GC are not)", op)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if out == nil {
		return body, nil
	}
	return append(out, body[last:]...), nil
}

func (r *reader) blockType() {
	if r.i >= len(r.b) {
		r.fail("unexpected end")
		return
	}
	switch r.b[r.i] {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.i++
	default:
		r.sleb()
	}
}

func (r *reader) memarg() {
	align := r.u32()
	if align&0x40 != 0 {
		r.u32() // memory index
	}
	r.sleb() // offset (unsigned, up to 64 bits; only its length matters here)
}

// functionNames reads the function names of the "name" custom section;
// nil when there is none or it cannot be read.
func (m *module) functionNames() map[uint32]string {
	for _, s := range m.sections {
		if s.id != secCustom {
			continue
		}
		r := &reader{b: s.body}
		if string(r.bytes(int(r.u32()))) != "name" || r.err != nil {
			continue
		}
		for r.i < len(r.b) && r.err == nil {
			id := r.byte()
			sub := r.bytes(int(r.u32()))
			if id != 1 {
				continue
			}
			sr := &reader{b: sub}
			n := sr.u32()
			names := make(map[uint32]string, n)
			for range n {
				idx := sr.u32()
				names[idx] = string(sr.bytes(int(sr.u32())))
				if sr.err != nil {
					return nil
				}
			}
			return names
		}
	}
	return nil
}

// definedType is the type index of the k-th defined function.
func (m *module) definedType(k uint32) (uint32, error) {
	i := m.find(secFunction)
	if i < 0 {
		return 0, errors.New("wasmsnap: no function section")
	}
	r := &reader{b: m.sections[i].body}
	n := r.u32()
	if k >= n {
		return 0, fmt.Errorf("wasmsnap: no defined function %d", k)
	}
	for range k {
		r.u32()
	}
	t := r.u32()
	if r.err != nil {
		return 0, fmt.Errorf("wasmsnap: function section: %w", r.err)
	}
	return t, nil
}
