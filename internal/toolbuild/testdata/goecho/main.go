// Command goecho is an echo tool written in Go for GOOS=wasip1
// (-buildmode=c-shared), exporting world `tool` with //go:wasmexport and a
// hand-written canonical ABI. It exists to test ComponentFromCore's wasip1
// path. Note: the component builds but does not run: the preview1 adapter
// allocates its state through the module's cabi_realloc, which re-enters the
// Go runtime during _initialize (runtime: badsystemstack). The Go SDK
// (sdk/go) exports a static cabi_realloc_adapter for that; real Go tools use
// it, and toolbuild.Build refuses a Go module without it.
package main

import "unsafe"

// keep holds every allocation handed to the host until the next call, so
// the Go GC cannot free memory the host is still writing into or reading.
var keep [][]byte

var retArea [3]uint32

//go:wasmexport cabi_realloc
func cabiRealloc(oldPtr, oldSize, align, newSize uint32) uint32 {
	if newSize == 0 {
		return align
	}
	b := make([]byte, newSize+align)
	keep = append(keep, b)
	p := uintptr(unsafe.Pointer(&b[0]))
	p = (p + uintptr(align) - 1) &^ (uintptr(align) - 1)
	if oldPtr != 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(p)), newSize),
			unsafe.Slice((*byte)(unsafe.Pointer(uintptr(oldPtr))), oldSize))
	}
	return uint32(p)
}

func retString(s string) uint32 {
	b := []byte(s)
	keep = append(keep, b)
	retArea[0] = uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	retArea[1] = uint32(len(b))
	return uint32(uintptr(unsafe.Pointer(&retArea)))
}

//go:wasmexport describe
func describe() uint32 { return retString("Echoes its input (Go, wasip1).") }

//go:wasmexport schema
func schema() uint32 { return retString(`{"type":"object"}`) }

//go:wasmexport execute
func execute(ptr, n uint32) uint32 {
	in := unsafe.Slice((*byte)(unsafe.Pointer(uintptr(ptr))), n)
	b := append([]byte(nil), in...)
	keep = append(keep, b)
	retArea[0] = 0 // ok
	retArea[1] = uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	retArea[2] = uint32(len(b))
	return uint32(uintptr(unsafe.Pointer(&retArea)))
}

func main() {}
