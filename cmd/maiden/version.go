package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/maiden-run/maiden"
)

// moduleVersion is maiden's version: the -ldflags value of a release,
// else the module version the Go toolchain recorded (`go install
// ...@v1.2.3` records it), with the commit of a build from a checkout.
func moduleVersion() string {
	v := version
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += "+" + rev
		if modified == "true" {
			v += ".dirty"
		}
	}
	return v
}

// versionLine is what `maiden version` prints.
func versionLine() string {
	return fmt.Sprintf("maiden %s (wasmtime %s, %s, %s/%s)", moduleVersion(), maiden.WasmtimeVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
