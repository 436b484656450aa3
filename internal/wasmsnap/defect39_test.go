package wasmsnap

import (
	"strings"
	"testing"
)

// Pass 39's defect: Instrument redirected direct calls of the WASI clock
// and random imports and refused ref.func of them in code, but copied the
// element section and the globals' initialisers byte for byte, so a module
// that put clock_time_get in its table read the clock through
// call_indirect without the counter, and a value frozen into the snapshot
// went unnoticed. Every form of element segment (flags 0 to 7) and a
// global's ref.func naming the import is now refused; naming a defined
// function stays allowed.
func TestInstrumentRefusesReferencesToCountedImports(t *testing.T) {
	module := func(global, elem []byte) []byte {
		var b builder
		b.add(secType, cat([]byte{2},
			[]byte{0x60, 3, 0x7f, 0x7e, 0x7f, 1, 0x7f}, // 0: clock_time_get
			[]byte{0x60, 0, 0})...)                     // 1: () -> ()
		b.add(secImport, cat([]byte{1}, str(wasiModule), str("clock_time_get"), []byte{0, 0})...) // function 0
		b.add(secFunction, 1, 1)                                                                  // function 1
		b.add(4, 1, 0x70, 0x00, 1)                                                                // a funcref table
		if global != nil {
			b.add(secGlobal, cat([]byte{1}, global)...)
		}
		if elem != nil {
			b.add(secElement, cat([]byte{1}, elem)...)
		}
		// clock_time_get(0, 0, 8), called directly: the call Instrument redirects.
		body := []byte{0, 0x41, 0, 0x42, 0, 0x41, 8, 0x10, 0, 0x1a, 0x0b}
		b.add(secCode, cat([]byte{1}, appendU32(nil, uint32(len(body))), body)...)
		return b.bytes()
	}
	const refused = "refers to a WASI clock or random import (function 0)"
	for _, tt := range []struct {
		name         string
		global, elem []byte
		want         string // "" for instrumented
	}{
		{"active, table 0, function indices", nil, []byte{0x00, 0x41, 0, 0x0b, 1, 0}, refused},
		{"passive, function indices", nil, []byte{0x01, 0x00, 1, 0}, refused},
		{"active, table given, function indices", nil, []byte{0x02, 0, 0x41, 0, 0x0b, 0x00, 1, 0}, refused},
		{"declarative, function indices", nil, []byte{0x03, 0x00, 1, 0}, refused},
		{"active, table 0, expressions", nil, []byte{0x04, 0x41, 0, 0x0b, 1, 0xd2, 0, 0x0b}, refused},
		{"passive, expressions", nil, []byte{0x05, 0x70, 1, 0xd2, 0, 0x0b}, refused},
		{"active, table given, expressions", nil, []byte{0x06, 0, 0x41, 0, 0x0b, 0x70, 1, 0xd2, 0, 0x0b}, refused},
		{"declarative, expressions", nil, []byte{0x07, 0x70, 2, 0xd0, 0x70, 0x0b, 0xd2, 0, 0x0b}, refused},
		{"a global's initialiser", []byte{0x70, 0x00, 0xd2, 0, 0x0b}, nil, "global 0's initialiser " + refused},
		{"flags past 7", nil, []byte{0x08, 0x00, 1, 0}, "element segment 0 has flags 8"},
		{"an offset this pass does not read", nil, []byte{0x00, 0xfd, 0x0b, 1, 1}, "opcode 0xfd"},
		{"a defined function in the table", nil, []byte{0x00, 0x41, 0, 0x0b, 1, 1}, ""},
		{"a defined function by expression", nil, []byte{0x04, 0x41, 0, 0x0b, 2, 0xd0, 0x70, 0x0b, 0xd2, 1, 0x0b}, ""},
		{"a global naming a defined function", []byte{0x70, 0x00, 0xd2, 1, 0x0b}, nil, ""},
	} {
		out, probe, err := Instrument(module(tt.global, tt.elem))
		switch {
		case tt.want == "" && (err != nil || probe.Imports != 1):
			t.Errorf("%s: Instrument = %+v, %v; want the clock's call redirected", tt.name, probe, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Instrument = %d bytes, %+v, %v; want refused: %q", tt.name, len(out), probe, err, tt.want)
		}
	}
}
