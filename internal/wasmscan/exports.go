package wasmscan

import "fmt"

// Exports returns the names of a component's top-level exports, in the
// order of its export sections, without compiling anything. maiden uses it
// to tell a tool (exports execute) from a middleware (exports handle) from
// the bytes alone, in a process that does not compile them (a worker's
// parent, maiden build's check). Nested components and instances are
// skipped without decoding them. It fails with ErrMalformed on bytes that
// are not a component or whose top-level sections do not decode.
func Exports(b []byte) ([]string, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: not a WebAssembly component (no WebAssembly magic number)", ErrMalformed)
	}
	if b[6] != 1 || b[7] != 0 {
		return nil, fmt.Errorf("%w: not a WebAssembly component (a core module, or an unknown layer %d)", ErrMalformed, b[6])
	}
	r := &reader{b: b, off: 8}
	var names []string
	for !r.done() {
		id := r.byte()
		sec := r.take(r.u32(), "component section")
		if r.err != nil {
			break
		}
		if id != 11 {
			continue
		}
		n := sec.count("export", 3)
		for i := uint32(0); i < n && sec.err == nil; i++ {
			name := exportName(sec)
			readSort(sec)
			sec.u32()
			switch opt := sec.byte(); opt {
			case 0x00:
			case 0x01:
				externType(sec)
			default:
				sec.fail("unknown export type flag 0x%02x", opt)
			}
			if sec.err == nil {
				names = append(names, name)
			}
		}
		r.finish(sec, "component export section")
	}
	if r.err != nil {
		return nil, r.err
	}
	return names, nil
}

// exportName reads an export's name (skipping its attributes, as
// nameAttributes does).
func exportName(r *reader) string {
	var name string
	read := func() {
		n := r.u32()
		if r.err == nil && uint64(n) <= uint64(r.remaining()) {
			name = string(r.b[r.off : r.off+int(n)])
		}
		r.skip(n, "name")
	}
	switch kind := r.byte(); kind {
	case 0x00, 0x01:
		read()
	case 0x02:
		read()
		n := r.count("name attribute", 2)
		for i := uint32(0); i < n && r.err == nil; i++ {
			switch a := r.byte(); a {
			case 0x00, 0x01, 0x02:
				r.name()
			default:
				r.fail("unknown name attribute 0x%02x", a)
			}
		}
	default:
		r.fail("unknown name encoding 0x%02x", kind)
	}
	return name
}
