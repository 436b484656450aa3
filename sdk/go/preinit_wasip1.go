//go:build wasip1 && maiden_preinit

//lint:file-ignore U1000 staticcheck does not see //go:wasmexport functions as used

package maiden

import (
	_ "syscall" // maidenRescanPreopens lives there: link it even if nothing else does
	_ "unsafe"  // go:linkname
)

// reseedRuntime is added to package runtime by maiden build (a go build
// -overlay file, see internal/toolbuild/preinit.go).
//
//go:linkname reseedRuntime runtime.maidenReseed
func reseedRuntime()

// rescanPreopens is added to package syscall by maiden build, generated
// from the GOROOT's own fs_wasip1.go (internal/toolbuild/preinit_fs.go): it
// lists the WASI preopened directories again, which syscall's init did at
// build time, when there were none.
//
//go:linkname rescanPreopens syscall.maidenRescanPreopens
func rescanPreopens()

// restore is the snapshot's _initialize: it runs once per instance, before
// any export, and makes the instance's own what init could only make at
// build time: the runtime's random state, and the call's directories.
//
//go:wasmexport maiden_restore
func restore() {
	reseedRuntime()
	rescanPreopens()
}
