package main

import (
	"runtime/debug"
	"testing"
)

func TestFormatVersion(t *testing.T) {
	t.Parallel()
	const rev = "52fb84173f4a5bddc19b1e7bbe36a24eb818489f"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, c := range []struct {
		name    string
		ldflags string
		info    *debug.BuildInfo
		want    string
	}{
		{"no build info", "dev", nil, "dev"},
		{"go install @version", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"go run in a checkout without VCS stamping", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		// Go 1.24+ stamps a checkout's build with a pseudo-version that
		// already names the commit (and +dirty): not named twice.
		{"checkout build, modified", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201051600-52fb84173f4a+dirty"}, Settings: vcs("true")}, "v0.0.0-20261201051600-52fb84173f4a+dirty"},
		{"release with -ldflags from a checkout", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201051600-52fb84173f4a"}, Settings: vcs("false")}, "v1.2.3+52fb84173f4a"},
		{"release with -ldflags, modified tree", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")}, "v1.2.3+52fb84173f4a.dirty"},
		{"release with -ldflags, no VCS", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "v1.2.3"},
		{"make dist without VERSION (git describe)", "52fb841-dirty", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")}, "52fb841-dirty"},
	} {
		if got := formatVersion(c.ldflags, c.info); got != c.want {
			t.Errorf("%s: formatVersion(%q, ...) = %q, want %q", c.name, c.ldflags, got, c.want)
		}
	}
}
