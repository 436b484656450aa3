package toolbuild

import (
	"errors"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/wasmsnap"
)

// growModule is a core module whose _initialize grows its one memory (1
// page, no maximum) by pages and traps if that fails: the smallest init
// that takes as much memory as it likes.
func growModule(pages uint32) []byte {
	leb := func(v int32) []byte { // signed LEB128
		var b []byte
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
				return append(b, c)
			}
			b = append(b, c|0x80)
		}
	}
	body := append([]byte{0, 0x41}, leb(int32(pages))...)                     // no locals; i32.const pages
	body = append(body, 0x40, 0, 0x41, 0x7f, 0x46, 0x04, 0x40, 0, 0x0b, 0x0b) // memory.grow; i32.const -1; i32.eq; if unreachable end; end
	section := func(id byte, b ...byte) []byte { return append([]byte{id, byte(len(b))}, b...) }
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = append(out, section(1, 1, 0x60, 0, 0)...) // type 0: () -> ()
	out = append(out, section(3, 1, 0)...)          // func 0: type 0
	out = append(out, section(5, 1, 0, 1)...)       // memory 0: min 1, no maximum
	exports := []byte{2, 11}
	exports = append(exports, "_initialize"...)
	exports = append(exports, 0, 0, 6)
	exports = append(exports, "memory"...)
	exports = append(exports, 2, 0)
	out = append(out, section(7, exports...)...)
	out = append(out, section(10, append([]byte{1, byte(len(body))}, body...)...)...)
	return out
}

// TestSnapshotRunMemoryCapped: the snapshot run (wizer, running a Go
// tool's init at build time) holds the init to snapshotMemoryPages (1
// GiB): an init that grows its memory past that has no snapshot, the
// build saying why, instead of taking up to 4 GiB of the building
// machine; one within it is snapshotted, and the snapshot declares the
// module's own maximum (none), not the cap.
func TestSnapshotRunMemoryCapped(t *testing.T) {
	t.Parallel()
	tc := toolchain(t)
	wizer, err := tc.wizerPath()
	if err != nil {
		t.Fatal(err)
	}
	_, err = tc.wizerRun(ctxFor(t), wizer, growModule(snapshotMemoryPages+1000), t.TempDir())
	var no *errNoSnapshot
	if !errors.As(err, &no) || !strings.Contains(err.Error(), "the snapshot run caps the tool's memory at 1024 MiB") {
		t.Fatalf("an init growing its memory to %d pages (cap %d): %v; want no snapshot, naming the cap", snapshotMemoryPages+1001, snapshotMemoryPages, err)
	}
	snap, err := tc.wizerRun(ctxFor(t), wizer, growModule(10), t.TempDir())
	if err != nil {
		t.Fatalf("an init growing its memory by 10 pages: %v", err)
	}
	if max, has, err := wasmsnap.MemoryMax(snap); err != nil || has {
		t.Fatalf("the snapshot's memory maximum: %d %v %v; want none, as the module declared", max, has, err)
	}
}
