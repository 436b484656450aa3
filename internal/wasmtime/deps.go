//go:build maiden_deps

package wasmtime

// The C headers and libwasmtime.a this package links come from the
// wasmtime-go module (see genflags). Importing it under a build tag nobody
// sets keeps the module in go.mod, since go mod tidy considers every build
// tag, without linking its Go bindings into maiden.
import _ "github.com/bytecodealliance/wasmtime-go/v39"
