// Package wasmsnap holds the core-module passes maiden build runs around a
// build-time snapshot (wizer) of a Go tool: Instrument counts the WASI
// wall-clock and random reads the module makes while it initialises, so
// that a value frozen into the snapshot does not go unnoticed; Coalesce
// merges the snapshot's data segments, because maiden's engine applies
// them one by one at every instantiation; SetExport points an export at
// another function.
//
// The passes understand exactly what they change (the type, import,
// function, global, export, code, data and data count sections) and copy
// every other section byte for byte; Instrument also reads the element
// section, to refuse a table entry naming an import it counts. Anything
// they do not understand is an error, never a silently wrong module.
package wasmsnap

import (
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secGlobal    = 6
	secExport    = 7
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
)

type section struct {
	id   byte
	body []byte
}

// module is a core module as a list of sections.
type module struct {
	sections []section
}

func parse(b []byte) (*module, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" || binary.LittleEndian.Uint32(b[4:8]) != 1 {
		return nil, errors.New("wasmsnap: not a core WebAssembly module (version 1)")
	}
	m := &module{}
	r := &reader{b: b, i: 8}
	for r.i < len(b) {
		id := r.byte()
		n := r.u32()
		body := r.bytes(int(n))
		if r.err != nil {
			return nil, fmt.Errorf("wasmsnap: section %d: %w", id, r.err)
		}
		m.sections = append(m.sections, section{id, body})
	}
	return m, nil
}

func (m *module) encode() []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range m.sections {
		out = append(out, s.id)
		out = appendU32(out, uint32(len(s.body)))
		out = append(out, s.body...)
	}
	return out
}

func (m *module) find(id byte) int {
	for i, s := range m.sections {
		if s.id == id {
			return i
		}
	}
	return -1
}

// insert places a new section of id where the binary format's order wants
// it (before the first known section with a greater order), and returns its
// index.
func (m *module) insert(id byte, body []byte) int {
	order := func(id byte) int {
		if id == secDataCount {
			return 95 // between element (9) and code (10)
		}
		return int(id) * 10
	}
	at := len(m.sections)
	for i, s := range m.sections {
		if s.id != secCustom && order(s.id) > order(id) {
			at = i
			break
		}
	}
	m.sections = append(m.sections, section{})
	copy(m.sections[at+1:], m.sections[at:])
	m.sections[at] = section{id, body}
	return at
}

// funcType is a function signature: value type bytes.
type funcType struct{ params, results []byte }

func (m *module) types() ([]funcType, error) {
	i := m.find(secType)
	if i < 0 {
		return nil, nil
	}
	r := &reader{b: m.sections[i].body}
	n := r.u32()
	var ts []funcType
	for k := uint32(0); k < n && r.err == nil; k++ {
		if r.byte() != 0x60 {
			return nil, errors.New("wasmsnap: type section: a type that is not a function type (GC types are not supported)")
		}
		p := r.bytes(int(r.u32()))
		res := r.bytes(int(r.u32()))
		ts = append(ts, funcType{append([]byte(nil), p...), append([]byte(nil), res...)})
	}
	if r.err != nil {
		return nil, fmt.Errorf("wasmsnap: type section: %w", r.err)
	}
	return ts, nil
}

type funcImport struct {
	module, name string
	index        uint32 // function index
	typ          uint32
}

// imports returns the function imports and the number of imported globals.
func (m *module) imports() (funcs []funcImport, globals uint32, err error) {
	i := m.find(secImport)
	if i < 0 {
		return nil, 0, nil
	}
	r := &reader{b: m.sections[i].body}
	n := r.u32()
	var fidx uint32
	for k := uint32(0); k < n && r.err == nil; k++ {
		mod := string(r.bytes(int(r.u32())))
		name := string(r.bytes(int(r.u32())))
		switch kind := r.byte(); kind {
		case 0x00:
			funcs = append(funcs, funcImport{mod, name, fidx, r.u32()})
			fidx++
		case 0x01: // table: reftype, limits
			r.byte()
			r.limits()
		case 0x02:
			r.limits()
		case 0x03:
			r.byte()
			r.byte()
			globals++
		case 0x04: // tag
			r.byte()
			r.u32()
		default:
			return nil, 0, fmt.Errorf("wasmsnap: import section: unknown import kind %#x", kind)
		}
	}
	if r.err != nil {
		return nil, 0, fmt.Errorf("wasmsnap: import section: %w", r.err)
	}
	return funcs, globals, nil
}

// vecCount is the leading count of a vector section, 0 when absent.
func (m *module) vecCount(id byte) (uint32, error) {
	i := m.find(id)
	if i < 0 {
		return 0, nil
	}
	r := &reader{b: m.sections[i].body}
	n := r.u32()
	return n, r.err
}

// appendToVec appends encoded items to the vector section id (created if
// absent).
func (m *module) appendToVec(id byte, items [][]byte) error {
	i := m.find(id)
	var n uint32
	var rest []byte
	if i >= 0 {
		r := &reader{b: m.sections[i].body}
		n = r.u32()
		if r.err != nil {
			return r.err
		}
		rest = r.b[r.i:]
	} else {
		i = m.insert(id, nil)
	}
	body := appendU32(nil, n+uint32(len(items)))
	body = append(body, rest...)
	for _, it := range items {
		body = append(body, it...)
	}
	m.sections[i].body = body
	return nil
}

type export struct {
	name  string
	kind  byte
	index uint32
}

func (m *module) exports() ([]export, error) {
	i := m.find(secExport)
	if i < 0 {
		return nil, nil
	}
	r := &reader{b: m.sections[i].body}
	n := r.u32()
	var es []export
	for k := uint32(0); k < n && r.err == nil; k++ {
		name := string(r.bytes(int(r.u32())))
		kind := r.byte()
		es = append(es, export{name, kind, r.u32()})
	}
	if r.err != nil {
		return nil, fmt.Errorf("wasmsnap: export section: %w", r.err)
	}
	return es, nil
}

func (m *module) setExports(es []export) {
	body := appendU32(nil, uint32(len(es)))
	for _, e := range es {
		body = appendU32(body, uint32(len(e.name)))
		body = append(body, e.name...)
		body = append(body, e.kind)
		body = appendU32(body, e.index)
	}
	if i := m.find(secExport); i >= 0 {
		m.sections[i].body = body
	} else {
		m.insert(secExport, body)
	}
}

// Exports lists the names of a core module's exports.
func Exports(core []byte) ([]string, error) {
	m, err := parse(core)
	if err != nil {
		return nil, err
	}
	es, err := m.exports()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.name
	}
	return names, nil
}

// SetExport makes the function export name refer to the function that the
// export from refers to, and removes the export from. It is how a
// snapshot's _initialize becomes the SDK's restore function: the component
// wrapping runs _initialize at every instantiation.
func SetExport(core []byte, name, from string) ([]byte, error) {
	m, err := parse(core)
	if err != nil {
		return nil, err
	}
	es, err := m.exports()
	if err != nil {
		return nil, err
	}
	src := -1
	for i, e := range es {
		if e.name == from && e.kind == 0 {
			src = i
		}
	}
	if src < 0 {
		return nil, fmt.Errorf("wasmsnap: the module exports no function %q", from)
	}
	idx := es[src].index
	var out []export
	replaced := false
	for i, e := range es {
		switch {
		case i == src:
			continue
		case e.name == name:
			e.kind, e.index, replaced = 0, idx, true
		}
		out = append(out, e)
	}
	if !replaced {
		out = append(out, export{name, 0, idx})
	}
	m.setExports(out)
	return m.encode(), nil
}

type reader struct {
	b   []byte
	i   int
	err error
}

func (r *reader) fail(msg string) {
	if r.err == nil {
		r.err = errors.New(msg)
	}
}

func (r *reader) byte() byte {
	if r.err != nil || r.i >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b)-r.i {
		r.fail("unexpected end")
		return nil
	}
	s := r.b[r.i : r.i+n]
	r.i += n
	return s
}

func (r *reader) u32() uint32 {
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if v > 0xffffffff {
				r.fail("LEB128 number out of range")
				return 0
			}
			return uint32(v)
		}
	}
	r.fail("malformed LEB128 number")
	return 0
}

// sleb skips (and returns) a signed LEB128 of up to 64 bits.
func (r *reader) sleb() int64 {
	var v int64
	var shift uint
	for shift < 70 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
	r.fail("malformed signed LEB128 number")
	return 0
}

func (r *reader) limits() {
	flags := r.byte()
	if flags&0x04 != 0 { // 64-bit
		r.sleb()
		if flags&1 != 0 {
			r.sleb()
		}
		return
	}
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

func appendU32(b []byte, v uint32) []byte {
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

func appendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// RemoveExport drops the export called name, if there is one.
func RemoveExport(core []byte, name string) ([]byte, error) {
	m, err := parse(core)
	if err != nil {
		return nil, err
	}
	es, err := m.exports()
	if err != nil {
		return nil, err
	}
	out := es[:0]
	for _, e := range es {
		if e.name != name {
			out = append(out, e)
		}
	}
	if len(out) == len(es) {
		return core, nil
	}
	m.setExports(out)
	return m.encode(), nil
}
