package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/maiden-run/maiden"
)

// moduleVersion is maiden's version, the same string `maiden version`
// prints and MCP's serverInfo.version carries.
func moduleVersion() string {
	info, _ := debug.ReadBuildInfo()
	return formatVersion(version, info)
}

// formatVersion picks the version: the -ldflags value of a release (main.version),
// else the module version the Go toolchain recorded (`go install ...@v1.2.3`
// records v1.2.3; a build in a checkout records a pseudo-version naming the
// commit), and appends the commit a build from a checkout records when the
// version does not already name it.
func formatVersion(ldflags string, info *debug.BuildInfo) string {
	v := ldflags
	if info == nil {
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
	if len(rev) > 12 {
		rev = rev[:12]
	}
	// git's shortest abbreviation is 7 digits: a version from `git describe`
	// or a pseudo-version names the commit already.
	if rev != "" && !strings.Contains(v, rev[:min(7, len(rev))]) {
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
