package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cacheFiles lists the compiled artifacts under a cache folder.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "??", "*.cwasm"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCacheShowTrimClear: maiden cache shows what maiden call put in a
// cache folder, trims it by age and by size, and clears it, leaving files
// that are not the cache's alone.
func TestCacheShowTrimClear(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "components")
	cfg := agentTOML(t, map[string]string{"echo": "", "logger": ""})
	for _, tool := range []string{"echo", "logger"} {
		input := "{}"
		if tool == "echo" {
			input = `{"message":"hi"}`
		}
		if r := cli(t, "", "call", "-config", cfg, "-cache", cache, tool, input); r.code != exitOK {
			t.Fatalf("call %s: %+v", tool, r)
		}
	}
	arts := cacheFiles(t, cache)
	if len(arts) != 2 {
		t.Fatalf("the calls left %d compiled components, want 2: %v", len(arts), arts)
	}
	notOurs := filepath.Join(cache, "notes.txt")
	if err := os.WriteFile(notOurs, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}

	type usage struct {
		Dir      string    `json:"dir"`
		Entries  int       `json:"entries"`
		Bytes    int64     `json:"bytes"`
		Oldest   time.Time `json:"oldest_use"`
		LastTrim time.Time `json:"last_trim"`
		Limit    int64     `json:"limit_bytes"`
	}
	show := func() usage {
		t.Helper()
		r := cli(t, "", "cache", "show", "-cache", cache, "-json")
		var u usage
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &u) != nil {
			t.Fatalf("cache show: %+v", r)
		}
		return u
	}
	t.Setenv("MAIDEN_CACHE_MAX", "")
	u := show()
	var size int64
	for _, a := range arts {
		fi, _ := os.Stat(a)
		size += fi.Size()
	}
	if u.Entries != 2 || u.Bytes <= size || u.Limit != 2<<30 || u.Dir == "" {
		t.Fatalf("show: %+v, want 2 entries of more than %d bytes (artifacts and records), the 2 GiB default", u, size)
	}
	r := cli(t, "", "cache", "show", "-cache", cache)
	if r.code != exitOK || !strings.Contains(r.stdout, "2 entries") || !strings.Contains(r.stdout, "limit 2.0 GiB (the default") {
		t.Fatalf("cache show: %+v", r)
	}

	// Age: an entry unused for 15 days goes at a trim, with no size limit.
	old := time.Now().Add(-15 * 24 * time.Hour)
	if err := os.Chtimes(arts[0], old, old); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MAIDEN_CACHE_MAX", "off")
	r = cli(t, "", "cache", "trim", "-cache", cache)
	if r.code != exitOK || !strings.Contains(r.stdout, "removed 1 entry") {
		t.Fatalf("trim by age: %+v", r)
	}
	if left := cacheFiles(t, cache); len(left) != 1 || left[0] != arts[1] {
		t.Fatalf("after the trim by age: %v, want only %s", left, arts[1])
	}
	if u := show(); u.Entries != 1 || u.Limit != 0 || u.LastTrim.IsZero() {
		t.Fatalf("show after the trim: %+v", u)
	}
	// A limit set to the default's value is still the variable's.
	t.Setenv("MAIDEN_CACHE_MAX", "2G")
	if r := cli(t, "", "cache", "show", "-cache", cache); !strings.Contains(r.stdout, "limit 2.0 GiB (MAIDEN_CACHE_MAX=2G)") {
		t.Fatalf("show with MAIDEN_CACHE_MAX=2G: %+v", r)
	}

	// Size: over a 1 KiB limit the last entry goes too.
	t.Setenv("MAIDEN_CACHE_MAX", "1K")
	r = cli(t, "", "cache", "trim", "-cache", cache, "-json")
	var st struct {
		Removed int   `json:"removed"`
		Kept    int64 `json:"kept_bytes"`
	}
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &st) != nil || st.Removed != 1 || st.Kept != 0 {
		t.Fatalf("trim by size: %+v", r)
	}

	// Clear: a new call's entry goes; what is not the cache's stays.
	t.Setenv("MAIDEN_CACHE_MAX", "")
	if r := cli(t, "", "call", "-config", cfg, "-cache", cache, "logger"); r.code != exitOK || len(cacheFiles(t, cache)) != 1 {
		t.Fatalf("call after the trims: %+v", r)
	}
	r = cli(t, "", "cache", "clear", "-cache", cache)
	if r.code != exitOK || !strings.Contains(r.stdout, "removed 1 entry") {
		t.Fatalf("clear: %+v", r)
	}
	if left := cacheFiles(t, cache); len(left) != 0 {
		t.Fatalf("after clear: %v", left)
	}
	if b, err := os.ReadFile(notOurs); err != nil || string(b) != "mine" {
		t.Fatalf("clear touched a file not the cache's: %q %v", b, err)
	}
	if u := show(); u.Entries != 0 || u.Bytes != 0 {
		t.Fatalf("show after clear: %+v", u)
	}
}

// TestCacheErrors: maiden cache names what is wrong, and looking at a
// folder that does not exist does not create it.
func TestCacheErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	r := cli(t, "", "cache", "show", "-cache", missing)
	if r.code != exitOK || !strings.Contains(r.stdout, "0 entries") {
		t.Fatalf("show of a missing folder: %+v", r)
	}
	r = cli(t, "", "cache", "clear", "-cache", missing)
	if r.code != exitOK || !strings.Contains(r.stdout, "removed 0 entries") {
		t.Fatalf("clear of a missing folder: %+v", r)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("maiden cache created %s (%v)", missing, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cache", "show", "-cache", "off"}, "-cache off names no cache"},
		{[]string{"cache", "trim", "extra"}, `unexpected argument "extra"`},
		{[]string{"cache"}, "show, trim, clear"},
	} {
		if r := cli(t, "", tc.args...); r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %+v, want exit %d naming %q", tc.args, r, exitUsage, tc.want)
		}
	}
	t.Setenv("MAIDEN_CACHE_MAX", "lots")
	r = cli(t, "", "cache", "show", "-cache", missing)
	if r.code != exitOK || !strings.Contains(r.stderr, `MAIDEN_CACHE_MAX="lots": not a size`) || !strings.Contains(r.stdout, "limit 2.0 GiB") {
		t.Fatalf("an unreadable limit: %+v", r)
	}
}
