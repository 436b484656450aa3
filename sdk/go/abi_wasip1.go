//go:build wasip1

//lint:file-ignore U1000 staticcheck does not see //go:wasmexport functions (and what only they use) as used

package maiden

// How a standard Go (GOOS=wasip1, -buildmode=c-shared) module meets the
// component model, and why each piece is shaped the way it is:
//
//   - The preview1 reactor adapter that wraps the module allocates its own
//     state on the module's first WASI call, which Go makes inside
//     _initialize, before Go's heap exists. It allocates through
//     cabi_realloc_adapter when the module exports one, so that export is
//     served from a static array, runs no Go runtime code (nosplit, no
//     calls, no allocation) and never frees.
//   - cabi_realloc must never call an import: the component model forbids
//     leaving the instance while the host is placing arguments or results
//     ("cannot leave component instance"). Go's allocator may read the
//     clock (a WASI import) when it starts a collection or scavenges, so
//     cabi_realloc serves blocks from an arena allocated at init, and only
//     when that is full takes more from Go's heap, which is safe because the
//     collector is switched off whenever the host may call cabi_realloc:
//     from the end of init until execute has copied its input, and for the
//     duration of each http-fetch. The tool's own code runs with the
//     collector on.
//   - Results stay in Go-managed memory until the host has copied them: Go's
//     collector never moves objects, and the returned text is referenced
//     from a global until cabi_post_<export> drops it. The post-return
//     functions must not allocate or call imports either; they only clear
//     references.
//   - _initialize runs from the start function wit-component adds, so every
//     package's init (and Register) has run before the first export.

import (
	"runtime"
	"runtime/debug"
	"unsafe"
)

// The imports (logImport, fetchImport) and what differs between contract
// versions are in contract_wasip1.go (maiden:tool@0.2.0, the default) and
// contract010_wasip1.go (0.1.0, with -tags maiden_tool_0_1). A tool's
// exports are in tool_wasip1.go; a middleware (-tags maiden_middleware,
// which maiden build sets for a package that calls Middleware) has its own
// in middleware_wasip1.go instead.

// linearMemory is the module's own memory.
type linearMemory struct{}

func (linearMemory) bytes(ptr, n uint32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(ptr))), n)
}

func addrOfBytes(b []byte) uint32     { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
func addrOfString(s string) uint32    { return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s)))) }
func addrOfArea(a *[3]uint32) uint32  { return uint32(uintptr(unsafe.Pointer(a))) }
func addrOfFetch(a *[6]uint32) uint32 { return uint32(uintptr(unsafe.Pointer(a))) }

// The adapter's arena. The preview1 adapter shipped with jco 1.35.0 asks
// for two 64 KiB blocks (align 8) on its first WASI call; 192 KiB leaves
// room for an adapter that needs a little more.
const adapterArenaSize = 192 << 10

var (
	adapterMem  [adapterArenaSize]byte
	adapterUsed uint32
)

// cabiReallocAdapter serves the preview1 adapter. It runs inside Go's
// _initialize, before the runtime is up: no calls, no allocation, no stack
// growth. Running out returns 0, which the adapter turns into a trap.
//
//go:wasmexport cabi_realloc_adapter
//go:nosplit
func cabiReallocAdapter(oldPtr, oldSize, align, newSize uint32) uint32 {
	if oldPtr != 0 && newSize <= oldSize {
		return oldPtr
	}
	if align == 0 || align&(align-1) != 0 {
		align = 8
	}
	base := uint32(uintptr(unsafe.Pointer(&adapterMem)))
	start := (base + adapterUsed + align - 1) &^ (align - 1)
	end := start + newSize
	if end < start || end > base+adapterArenaSize {
		return 0
	}
	adapterUsed = end - base
	for i := uint32(0); oldPtr != 0 && i < oldSize; i++ {
		*(*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(start+i))) = *(*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(oldPtr+i)))
	}
	return start
}

// The main arena for cabi_realloc: big enough for a typical input and a
// typical http-fetch response, so that the heap fallback is the exception.
const arenaSize = 256 << 10

var (
	arenaMem []byte // keeps the arena alive
	arena    bump
	spilled  [][]byte // heap blocks cabi_realloc handed out when the arena was full
)

func init() {
	arenaMem = make([]byte, arenaSize)
	arena = bump{base: addrOfBytes(arenaMem), size: arenaSize}
	// Until Register runs, a module whose init functions allocate heavily
	// could start a collection; that is fine: imports are allowed in init.
}

//go:wasmexport cabi_realloc
func cabiRealloc(oldPtr, oldSize, align, newSize uint32) uint32 {
	return realloc(&arena, oldPtr, oldSize, align, newSize, spill, move)
}

// spill takes a block from Go's heap. Callers have the collector off.
func spill(align, n uint32) uint32 {
	if align == 0 || align&(align-1) != 0 {
		align = 8
	}
	b := make([]byte, n+align)
	spilled = append(spilled, b)
	return (addrOfBytes(b) + align - 1) &^ (align - 1)
}

func move(dst, src, n uint32) {
	copy(linearMemory{}.bytes(dst, n), linearMemory{}.bytes(src, n))
}

// releaseScratch makes the arena and the spilled blocks available again. It
// does not allocate.
func releaseScratch() {
	arena.reset()
	clear(spilled)
	spilled = spilled[:0]
}

// gcPercent is the collector's setting while the tool's own code runs.
var gcPercent = 100

// gcOff stops the collector from starting a cycle (and waits for a running
// one to finish), so that allocation cannot reach an import.
func gcOff() {
	if p := debug.SetGCPercent(-1); p >= 0 {
		gcPercent = p
	}
}

func gcOn() { debug.SetGCPercent(gcPercent) }

func registeredHook() { gcOff() }

// The export's result area and the text it points at, kept alive until the
// host has copied it and called cabi_post_<export>.
var (
	retArea [3]uint32
	retText string
)

func returnString(s string) uint32 {
	retText = s
	retArea[0], retArea[1] = addrOfString(s), uint32(len(s))
	return addrOfArea(&retArea)
}

func hostLog(level Level, msg string) {
	var p uint32
	if msg != "" {
		p = addrOfString(msg)
	}
	logImport(uint32(level), p, uint32(len(msg)))
	runtime.KeepAlive(msg)
}
