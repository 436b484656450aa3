package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/maiden-run/maiden/internal/compcache"
)

// maiden cache show|trim|clear: the compiled-component cache on disk
// (internal/compcache), which otherwise only maiden itself looks after
// (a Put trims it at most hourly).

const cacheShowHelp = `Shows the compiled-component cache: its folder, how many compiled components it holds
and their size (every engine version's), the size limit and where it comes from
($MAIDEN_CACHE_MAX, default 2GiB; "off": none), the least and most recent use of an entry,
and the last trim. Nothing is changed. With -json: {"dir", "entries", "bytes", "oldest_use",
"newest_use", "last_trim", "limit_bytes", "max_age_seconds"} (times in RFC 3339; zero times
when there is no entry or no trim yet).`

const cacheTrimHelp = `Trims the compiled-component cache now, as maiden does by itself at most hourly when it
writes an entry: entries unused for 14 days go, then, while the rest is over the size limit
($MAIDEN_CACHE_MAX, default 2GiB), the least recently used until 70% of the limit is left.
Prints what was removed and what is left. With -json: {"removed", "freed_bytes", "kept_bytes"}.`

const cacheClearHelp = `Removes every entry of the compiled-component cache, of every engine version: the next load
of each tool compiles it again. Only the files the cache writes are removed (anything else in
the folder stays), and an entry another maiden is writing right now is left to finish. A
running maiden keeps the code it has loaded. With -json: {"removed", "freed_bytes"}.`

// exitCacheFailed: the cache folder could not be listed.
const exitCacheFailed = 1

// cacheCmd is what maiden cache's subcommands parsed: the cache (nil when
// its folder does not exist yet: nothing is created), the folder, -json,
// and the size limit $MAIDEN_CACHE_MAX sets.
type cacheCmd struct {
	c      *compcache.Cache
	dir    string
	asJSON bool
	limit  int64
}

// cacheFlags parses the flags of maiden cache's subcommands and opens the
// cache; code is -1 to go on, else the exit code (the problem printed).
func cacheFlags(name string, args []string, stderr io.Writer) (cc cacheCmd, code int) {
	fl := bareFlags(name, stderr)
	fl.StringVar(&cc.dir, "cache", "", "the compiled-component cache `DIR` (default: the user cache directory's maiden/components)")
	fl.BoolVar(&cc.asJSON, "json", false, "print the result as JSON")
	pos, err := parseInterspersed(fl, args)
	if err != nil {
		return cc, parseFailed(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "maiden %s: unexpected argument %q\n", name, pos[0])
		return cc, exitUsage
	}
	switch cc.dir {
	case "off":
		fmt.Fprintf(stderr, "maiden %s: -cache off names no cache; give its folder, or leave -cache out for the default\n", name)
		return cc, exitUsage
	case "":
		if cc.dir = compcache.DefaultDir(); cc.dir == "" {
			fmt.Fprintf(stderr, "maiden %s: no user cache directory ($XDG_CACHE_HOME or $HOME); give the cache's folder with -cache DIR\n", name)
			return cc, exitUsage
		}
	}
	// A limit it cannot read is named; the default applies (as in Open).
	if cc.limit, err = compcache.MaxBytesFromEnv(); err != nil {
		fmt.Fprintf(stderr, "maiden %s: %v\n", name, err)
	}
	if _, err := os.Stat(cc.dir); errors.Is(err, fs.ErrNotExist) {
		return cc, -1
	}
	if cc.c, err = compcache.Open(cc.dir, "", nil); err != nil {
		fmt.Fprintf(stderr, "maiden %s: %v\n", name, err)
		return cc, exitUsage
	}
	cc.dir = cc.c.Dir()
	return cc, -1
}

func cmdCacheShow(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	cc, code := cacheFlags("cache show", args, stderr)
	if code >= 0 {
		return code
	}
	// No folder yet: empty, with the limit a cache would get.
	u := compcache.Usage{MaxBytes: cc.limit, MaxAge: compcache.MaxAge.Seconds()}
	if cc.c != nil {
		defer cc.c.Close()
		var err error
		if u, err = cc.c.Usage(); err != nil {
			fmt.Fprintf(stderr, "maiden cache show: %v\n", err)
			return exitCacheFailed
		}
	}
	dir, asJSON := cc.dir, cc.asJSON
	if asJSON {
		printJSON(stdout, struct {
			Dir string `json:"dir"`
			compcache.Usage
		}{dir, u})
		return exitOK
	}
	fmt.Fprintf(stdout, "compiled-component cache %s\n", dir)
	entries := "entries"
	if u.Entries == 1 {
		entries = "entry"
	}
	fmt.Fprintf(stdout, "%d %s, %s; %s\n", u.Entries, entries, byteSize(u.Bytes), cacheLimit(u.MaxBytes))
	if u.Entries > 0 {
		fmt.Fprintf(stdout, "used: least recently %s, most recently %s (an entry unused for %d days goes at the next trim)\n",
			u.Oldest.Local().Format(time.DateTime), u.Newest.Local().Format(time.DateTime), int(compcache.MaxAge.Hours()/24))
	}
	last := "never"
	if !u.LastTrim.IsZero() {
		last = u.LastTrim.Local().Format(time.DateTime)
	}
	fmt.Fprintf(stdout, "last trim: %s (maiden trims at most hourly when it writes an entry; maiden cache trim does it now)\n", last)
	return exitOK
}

// cacheLimit says what bounds the cache's size and where the bound comes
// from.
func cacheLimit(max int64) string {
	env := strings.TrimSpace(os.Getenv(compcache.MaxBytesEnv))
	_, err := compcache.ParseSize(env)
	switch {
	case max == 0:
		return fmt.Sprintf("no size limit (%s=%s)", compcache.MaxBytesEnv, env)
	case env != "" && err == nil:
		return fmt.Sprintf("limit %s (%s=%s)", byteSize(max), compcache.MaxBytesEnv, env)
	}
	return fmt.Sprintf("limit %s (the default; %s sets it)", byteSize(max), compcache.MaxBytesEnv)
}

func cmdCacheTrim(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return cacheRemove("cache trim", args, stdout, stderr, (*compcache.Cache).Trim, true)
}

func cmdCacheClear(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return cacheRemove("cache clear", args, stdout, stderr, (*compcache.Cache).Clear, false)
}

// cacheRemove runs trim or clear and says what it removed (and, if
// withKept, what is left).
func cacheRemove(name string, args []string, stdout, stderr io.Writer, op func(*compcache.Cache) (compcache.TrimStats, error), withKept bool) int {
	cc, code := cacheFlags(name, args, stderr)
	if code >= 0 {
		return code
	}
	var st compcache.TrimStats
	if cc.c != nil {
		defer cc.c.Close()
		var err error
		if st, err = op(cc.c); err != nil {
			fmt.Fprintf(stderr, "maiden %s: %v\n", name, err)
			return exitCacheFailed
		}
	}
	dir, asJSON := cc.dir, cc.asJSON
	if asJSON {
		out := map[string]any{"removed": st.Removed, "freed_bytes": st.Freed}
		if withKept {
			out["kept_bytes"] = st.Kept
		}
		printJSON(stdout, out)
		return exitOK
	}
	entries := "entries"
	if st.Removed == 1 {
		entries = "entry"
	}
	fmt.Fprintf(stdout, "%s: removed %d %s (%s)", dir, st.Removed, entries, byteSize(st.Freed))
	if withKept {
		fmt.Fprintf(stdout, "; %s left", byteSize(st.Kept))
	}
	fmt.Fprintln(stdout)
	return exitOK
}

// byteSize prints n bytes in the largest binary unit it fills, as
// $MAIDEN_CACHE_MAX reads them (1.5 GiB, 320 MiB, 12 KiB, 7 bytes).
func byteSize(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v < 10 {
		return fmt.Sprintf("%.1f %s", v, units[u])
	}
	return fmt.Sprintf("%.0f %s", v, units[u])
}
