package wasmscan

// Module is the state one instantiation of a core module creates in the host:
// what wasmtime allocates per instance, outside the compiled code (which all
// instances share).
type Module struct {
	// Size is the module's encoded size in bytes.
	Size int
	// Functions counts defined and imported functions: each has a slot in
	// the instance's context (a function reference or an import record).
	Functions uint64
	// Imports counts imported tables, memories, globals and tags: each
	// has a record in the instance's context pointing at its owner.
	Imports uint64
	// Globals counts defined globals (an imported one is in Imports).
	Globals uint64
	// Tables and TableElements count defined tables and their initial
	// elements, which are allocated at instantiation.
	Tables, TableElements uint64
	// Memories and MemoryBytes count defined linear memories and their
	// initial size. Linear memory is charged to memory_mb; these are here
	// for the store's limit on the number of memories and for reports.
	Memories, MemoryBytes uint64
	// DataBytes is the payload of all data segments; ElemEntries the
	// entries of all element segments. When a segment cannot be decoded
	// exactly (a constant expression this scanner does not know), the
	// section's size is used instead: it is an upper bound on both.
	DataBytes, ElemEntries uint64
}

// scanModule decodes the sections of a core module that say how much state
// an instance of it holds; the rest is skipped by length.
func scanModule(r *reader) Module {
	m := Module{Size: len(r.b)}
	if r.remaining() < 8 || string(r.b[:4]) != "\x00asm" || string(r.b[4:8]) != "\x01\x00\x00\x00" {
		r.fail("core module does not start with the WebAssembly 1 preamble")
		return m
	}
	r.off = 8
	for !r.done() {
		id := r.byte()
		sec := r.take(r.u32(), "core module section")
		if r.err != nil {
			break
		}
		switch id {
		case 2:
			importSection(sec, &m)
		case 3:
			m.Functions = add(m.Functions, uint64(sec.count("function", 1)))
			sec.off = len(sec.b)
		case 4:
			tableSection(sec, &m)
		case 5:
			n := sec.count("memory", 2)
			for i := uint32(0); i < n && sec.err == nil; i++ {
				m.Memories++
				m.MemoryBytes = add(m.MemoryBytes, memType(sec))
			}
		case 6:
			// The count of a valid module is exact (wasmtime checks that the
			// section holds that many globals), and a count larger than the
			// section could hold is refused here, so the entries need no
			// decoding: their constant expressions may use any proposal.
			m.Globals = add(m.Globals, uint64(sec.count("global", 1)))
			sec.off = len(sec.b)
		case 9:
			m.ElemEntries = add(m.ElemEntries, exactOrBound(sec, elemSection))
		case 11:
			m.DataBytes = add(m.DataBytes, exactOrBound(sec, dataSection))
		default:
			sec.off = len(sec.b)
		}
		r.finish(sec, sectionName(id))
	}
	return m
}

func sectionName(id byte) string {
	names := map[byte]string{2: "the import section", 3: "the function section", 4: "the table section",
		5: "the memory section", 9: "the element section", 11: "the data section"}
	if n, ok := names[id]; ok {
		return n
	}
	return "a section"
}

// exactOrBound runs decode over a section; if the section uses an encoding
// this scanner does not know, the section's size bounds what it counts (each
// data byte and each element entry takes at least one byte), so the scan stays
// sound without refusing a module wasmtime would accept.
func exactOrBound(sec *reader, decode func(*reader) uint64) uint64 {
	try := &reader{b: sec.b, base: sec.base}
	n := decode(try)
	sec.off = len(sec.b)
	if try.err != nil || try.off != len(try.b) {
		return uint64(len(sec.b))
	}
	return n
}

func importSection(r *reader, m *Module) {
	n := r.count("import", 4)
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.name() // module
		r.name() // field
		switch kind := r.byte(); kind {
		case 0x00: // function
			r.u32()
			m.Functions = add(m.Functions, 1)
		case 0x01:
			tableType(r)
			m.Imports = add(m.Imports, 1)
		case 0x02:
			memType(r)
			m.Imports = add(m.Imports, 1)
		case 0x03:
			valType(r)
			r.byte() // mutability
			m.Imports = add(m.Imports, 1)
		case 0x04: // tag
			r.byte()
			r.u32()
			m.Imports = add(m.Imports, 1)
		default:
			r.fail("unknown import kind 0x%02x", kind)
		}
	}
}

func tableSection(r *reader, m *Module) {
	n := r.count("table", 2)
	for i := uint32(0); i < n && r.err == nil; i++ {
		withInit := false
		if r.remaining() > 0 && r.b[r.off] == 0x40 {
			// 0x40 0x00 tabletype expr: a table with an initialiser.
			r.byte()
			if r.byte() != 0 {
				r.fail("unknown table encoding")
			}
			withInit = true
		}
		m.Tables++
		m.TableElements = add(m.TableElements, tableType(r))
		if withInit {
			constExpr(r)
		}
	}
}

// tableType returns the table's initial size.
func tableType(r *reader) uint64 {
	refType(r)
	min, _ := limits(r)
	return min
}

// memType returns the memory's initial size in bytes.
func memType(r *reader) uint64 {
	min, pageLog2 := limits(r)
	if pageLog2 >= 64 || min > (^uint64(0))>>pageLog2 {
		return ^uint64(0)
	}
	return min << pageLog2
}

// limits reads a limits encoding (with the memory64, threads and custom page
// size flags) and returns the minimum and log2 of the page size.
func limits(r *reader) (min uint64, pageLog2 uint32) {
	flags := r.byte()
	if flags&^0x0f != 0 {
		r.fail("unknown limits flags 0x%02x", flags)
		return 0, 16
	}
	min = r.u64()
	if flags&0x01 != 0 {
		r.u64() // maximum
	}
	pageLog2 = 16
	if flags&0x08 != 0 {
		pageLog2 = r.u32()
	}
	return min, pageLog2
}

// refType skips a reference type: a one-byte shorthand, or (ref null? ht).
func refType(r *reader) {
	switch c := r.byte(); {
	case c == 0x63 || c == 0x64:
		r.sleb(33)
	case c < 0x40 || c >= 0x80:
		r.fail("unknown reference type 0x%02x", c)
	}
}

// valType skips a value type: a number, vector or reference type.
func valType(r *reader) {
	if r.remaining() > 0 && r.b[r.off] >= 0x7b && r.b[r.off] <= 0x7f {
		r.byte()
		return
	}
	refType(r)
}

// constExpr skips a constant expression up to its end opcode. It knows the
// instructions constant expressions may use in WebAssembly 3.0 (with
// extended-const and GC); anything else fails the decode.
func constExpr(r *reader) {
	for r.err == nil {
		switch op := r.byte(); op {
		case 0x0b: // end
			return
		case 0x41: // i32.const
			r.sleb(32)
		case 0x42: // i64.const
			r.sleb(64)
		case 0x43: // f32.const
			r.skip(4, "f32 constant")
		case 0x44: // f64.const
			r.skip(8, "f64 constant")
		case 0x23, 0xd2: // global.get, ref.func
			r.u32()
		case 0xd0: // ref.null
			r.sleb(33)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended-const arithmetic
		case 0xfd: // v128.const
			if sub := r.u32(); sub != 12 {
				r.fail("instruction 0xfd %d in a constant expression", sub)
			}
			r.skip(16, "v128 constant")
		case 0xfb: // GC
			switch sub := r.u32(); sub {
			case 0, 1, 6, 7: // struct.new(_default), array.new(_default)
				r.u32()
			case 8: // array.new_fixed
				r.u32()
				r.u32()
			case 26, 27, 28: // any.convert_extern, extern.convert_any, ref.i31
			default:
				r.fail("instruction 0xfb %d in a constant expression", sub)
			}
		default:
			r.fail("instruction 0x%02x in a constant expression", op)
		}
	}
}

// elemSection returns the number of entries in all element segments.
func elemSection(r *reader) uint64 {
	var total uint64
	n := r.count("element segment", 2)
	for i := uint32(0); i < n && r.err == nil; i++ {
		flags := r.u32()
		if flags > 7 {
			r.fail("unknown element segment flags %d", flags)
			break
		}
		active, explicitTable, exprs := flags&1 == 0, flags&2 != 0, flags&4 != 0
		if active && explicitTable {
			r.u32() // table index
		}
		if active {
			constExpr(r) // offset
		}
		if flags&3 != 0 {
			// elemkind (0x00) for function indices, a reftype for expressions
			if exprs {
				refType(r)
			} else if r.byte() != 0 {
				r.fail("unknown element kind")
			}
		}
		entries := r.count("element", 1)
		for j := uint32(0); j < entries && r.err == nil; j++ {
			if exprs {
				constExpr(r)
			} else {
				r.u32()
			}
		}
		total = add(total, uint64(entries))
	}
	return total
}

// dataSection returns the payload bytes of all data segments.
func dataSection(r *reader) uint64 {
	var total uint64
	n := r.count("data segment", 1)
	for i := uint32(0); i < n && r.err == nil; i++ {
		switch flags := r.u32(); flags {
		case 0:
			constExpr(r)
		case 1:
		case 2:
			r.u32()
			constExpr(r)
		default:
			r.fail("unknown data segment flags %d", flags)
		}
		size := r.u32()
		r.skip(size, "data segment")
		total = add(total, uint64(size))
	}
	return total
}
