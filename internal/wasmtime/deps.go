package wasmtime

// libwasmtime.a reaches the link through the wasmtime-go module, which ships
// it for each platform and names it in its own cgo directives
// (-L${SRCDIR}/build/<platform> -lwasmtime). Go passes every package's
// LDFLAGS to the final link, so this import links the library into any
// program that uses this package, from any module cache, with nothing
// generated beforehand. Only wasmtime-go's package is linked, not its Go
// API: nothing here calls it, and its initialisation allocates one empty
// map. The C declarations this package compiles against are its own
// (capi.h).
import _ "github.com/bytecodealliance/wasmtime-go/v39"
