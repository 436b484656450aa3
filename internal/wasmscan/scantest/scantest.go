// Package scantest writes WebAssembly component binaries with chosen
// per-instance state (globals, functions, tables, data and element segments,
// nested components instantiated many times), for tests of wasmscan and of
// the limits built on it. The binaries are valid: wasmtime compiles and
// instantiates them. Import it only from tests.
package scantest

// ModuleSpec says what one core module defines.
type ModuleSpec struct {
	Globals   int    // immutable i32 globals
	Functions int    // empty functions () -> ()
	Table     uint32 // initial elements of one funcref table (0: no table)
	Tables    int    // extra one-element funcref tables
	Memories  int    // one-page memories
	DataBytes int    // bytes in one passive data segment (0: none)
	// ElemEntries fills the table from element 0 with function 0; it needs
	// Functions >= 1 and Table >= ElemEntries.
	ElemEntries int
}

// Module encodes a core module.
func Module(s ModuleSpec) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	if s.Functions > 0 {
		out = append(out, section(1, vec(1, []byte{0x60, 0, 0}))...) // type 0: func () -> ()
		funcs := make([]byte, s.Functions)                           // each of type 0
		out = append(out, section(3, vec(s.Functions, funcs))...)
	}
	tables := s.Tables
	var tab []byte
	if s.Table > 0 {
		tables++
		tab = append(tab, 0x70, 0x00)
		tab = uleb(tab, uint64(s.Table))
	}
	for range s.Tables {
		tab = append(tab, 0x70, 0x00, 0x01)
	}
	if tables > 0 {
		out = append(out, section(4, vec(tables, tab))...)
	}
	if s.Memories > 0 {
		var mem []byte
		for range s.Memories {
			mem = append(mem, 0x00, 0x01)
		}
		out = append(out, section(5, vec(s.Memories, mem))...)
	}
	if s.Globals > 0 {
		g := make([]byte, 0, 5*s.Globals)
		for range s.Globals {
			g = append(g, 0x7f, 0x00, 0x41, 0x00, 0x0b) // i32, immutable, i32.const 0 end
		}
		out = append(out, section(6, vec(s.Globals, g))...)
	}
	if s.ElemEntries > 0 {
		seg := []byte{0x00, 0x41, 0x00, 0x0b} // active, table 0, offset i32.const 0
		seg = uleb(seg, uint64(s.ElemEntries))
		seg = append(seg, make([]byte, s.ElemEntries)...) // function 0 each
		out = append(out, section(9, vec(1, seg))...)
	}
	if s.Functions > 0 {
		body := []byte{0x02, 0x00, 0x0b} // size 2: no locals, end
		code := make([]byte, 0, 3*s.Functions)
		for range s.Functions {
			code = append(code, body...)
		}
		out = append(out, section(10, vec(s.Functions, code))...)
	}
	if s.DataBytes > 0 {
		seg := uleb([]byte{0x01}, uint64(s.DataBytes)) // passive
		seg = append(seg, make([]byte, s.DataBytes)...)
		out = append(out, section(11, vec(1, seg))...)
	}
	return out
}

// Component encodes a component that defines module once and instantiates
// it n times.
func Component(module []byte, n int) []byte {
	out := []byte("\x00asm\x0d\x00\x01\x00")
	out = append(out, section(1, module)...)
	return append(out, section(2, instantiations(0x00, n))...)
}

// Nest encodes a component that defines inner (a component) once and
// instantiates it n times, so inner's instances are created n times over.
func Nest(inner []byte, n int) []byte {
	out := []byte("\x00asm\x0d\x00\x01\x00")
	out = append(out, section(4, inner)...)
	return append(out, section(5, instantiations(0x00, n))...)
}

// instantiations is a vector of n "instantiate index 0 with no arguments"
// (kind 0x00), or of n instances made of no exports (kind 0x01).
func instantiations(kind byte, n int) []byte {
	one := []byte{kind, 0x00, 0x00}
	if kind == 0x01 {
		one = []byte{kind, 0x00}
	}
	b := make([]byte, 0, len(one)*n)
	for range n {
		b = append(b, one...)
	}
	return vec(n, b)
}

func section(id byte, payload []byte) []byte {
	out := uleb([]byte{id}, uint64(len(payload)))
	return append(out, payload...)
}

func vec(n int, items []byte) []byte {
	return append(uleb(nil, uint64(n)), items...)
}

func uleb(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// Bags encodes a component of n core instances made of no exports: no state
// at run time, but definitions the compiler walks once per instantiation of
// the component.
func Bags(n int) []byte {
	out := []byte("\x00asm\x0d\x00\x01\x00")
	return append(out, section(2, instantiations(0x01, n))...)
}
