package compcache

import (
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// What maiden cache (cmd/maiden) shows and does: a cache's size, a trim on
// demand, and removing every entry. All three go by the names the cache
// writes and through the checked handle, like a trim inside Put (trim.go).

// DefaultDir is the cache folder maiden uses when none is given:
// os.UserCacheDir()/maiden/components, or "" when the user has no cache
// directory (no $XDG_CACHE_HOME and no $HOME).
func DefaultDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "maiden", "components")
}

// Usage is what a cache folder holds, for every engine's entries.
type Usage struct {
	Entries  int       `json:"entries"`         // compiled components (an artifact each)
	Bytes    int64     `json:"bytes"`           // their artifacts and records, and half-written ones
	Oldest   time.Time `json:"oldest_use"`      // the least recent use of an entry; zero when empty
	Newest   time.Time `json:"newest_use"`      // the most recent
	LastTrim time.Time `json:"last_trim"`       // zero: never trimmed
	MaxBytes int64     `json:"limit_bytes"`     // the size limit; 0: none
	MaxAge   float64   `json:"max_age_seconds"` // entries unused this long go at the next trim
}

// Usage lists the cache without changing it. An entry's use is its
// artifact's modification time, which loads move forward at most hourly.
func (c *Cache) Usage() (Usage, error) {
	u := Usage{MaxBytes: c.maxBytes.Load(), MaxAge: MaxAge.Seconds()}
	entries, _, err := c.scan(time.Now(), false)
	if err != nil {
		return u, err
	}
	for _, e := range entries {
		u.Bytes += e.bytes
		if !e.artifact {
			continue
		}
		u.Entries++
		if u.Oldest.IsZero() || e.used.Before(u.Oldest) {
			u.Oldest = e.used
		}
		if e.used.After(u.Newest) {
			u.Newest = e.used
		}
	}
	var st unix.Stat_t
	if unix.Fstatat(c.fd, stampName, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		u.LastTrim = time.Unix(st.Mtim.Unix())
	}
	return u, nil
}

// Trim trims the cache now by the policy a Put applies when a trim is due
// (trim.go), after any trim in progress in this process.
func (c *Cache) Trim() (TrimStats, error) {
	c.trimming.Lock()
	defer c.trimming.Unlock()
	return c.startTrim("")
}

// Clear removes every entry, whatever its age or engine, and what a trim
// removes of half-written ones. A Put in progress elsewhere (its temporary
// file, or its artifact before the record, younger than an hour) is left to
// finish; a process that still maps a removed artifact keeps reading it,
// and its next load compiles again.
func (c *Cache) Clear() (TrimStats, error) {
	c.trimming.Lock()
	defer c.trimming.Unlock()
	now := time.Now()
	entries, st, err := c.scan(now, true)
	if err != nil {
		return st, err
	}
	for _, e := range entries {
		if e.artifact && e.record || e.staleHalf(now) {
			st.Removed++
			st.Freed += c.removeEntry(e)
		}
	}
	return st, nil
}
