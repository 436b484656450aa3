//go:build wasip1 && maiden_preinit

//lint:file-ignore U1000 staticcheck does not see //go:wasmexport functions as used

package maiden

import _ "unsafe" // go:linkname

// reseedRuntime is added to package runtime by maiden build (a go build
// -overlay file, see internal/toolbuild/preinit.go).
//
//go:linkname reseedRuntime runtime.maidenReseed
func reseedRuntime()

//go:wasmexport maiden_restore
func restore() { reseedRuntime() }
