package sandbox

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// cachedFiles returns the disk cache's artifact and record for the one
// component cached in dir.
func cachedFiles(t *testing.T, dir string) (artifact, record string) {
	t.Helper()
	arts, _ := filepath.Glob(filepath.Join(dir, "*", "*.cwasm"))
	if len(arts) != 1 {
		t.Fatalf("cache holds %v, want one artifact", arts)
	}
	return arts[0], arts[0] + ".sha256"
}

// logTo returns a logger writing maiden's diagnostics into buf.
func logTo(buf *testkit.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// flipCodeByte flips one bit in the middle of the artifact's machine code
// (its ELF .text section), in place: the attack of issue 9, an overwritten
// code section.
func flipCodeByte(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("the artifact is not the ELF image this test expects: %v", err)
	}
	text := f.Section(".text")
	f.Close()
	if text == nil || text.Size == 0 {
		t.Fatal("artifact has no .text section")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[text.Offset+text.Size/2] ^= 0x40
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDiskCacheRefusesTampering: compiled code on disk is run only if it is
// the file maiden wrote, reached without links, with the bytes recorded when
// it was written. Otherwise it is recompiled, the tool still works, and the
// cache is healed for the next run.
func TestDiskCacheRefusesTampering(t *testing.T) {
	t.Parallel()
	echo := testkit.Component(t, "echo")
	tests := []struct {
		name   string
		tamper func(t *testing.T, artifact, record string)
	}{
		{"flipped byte in the code section", func(t *testing.T, art, _ string) { flipCodeByte(t, art) }},
		{"artifact is a link to a verified copy", func(t *testing.T, art, _ string) {
			cp := filepath.Join(t.TempDir(), "copy.cwasm")
			b, _ := os.ReadFile(art)
			if err := os.WriteFile(cp, b, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(art)
			if err := os.Symlink(cp, art); err != nil {
				t.Fatal(err)
			}
		}},
		{"record is a link", func(t *testing.T, _, rec string) {
			cp := filepath.Join(t.TempDir(), "copy.sha256")
			b, _ := os.ReadFile(rec)
			if err := os.WriteFile(cp, b, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(rec)
			if err := os.Symlink(cp, rec); err != nil {
				t.Fatal(err)
			}
		}},
		{"subdirectory swapped for a link", func(t *testing.T, art, _ string) {
			sub := filepath.Dir(art)
			moved := filepath.Join(t.TempDir(), "moved")
			if err := os.Rename(sub, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, sub); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage of the same size", func(t *testing.T, art, _ string) {
			fi, _ := os.Stat(art)
			if err := os.WriteFile(art, make([]byte, fi.Size()), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			first := newSandbox(t, &Options{CacheDir: dir})
			if li, err := first.Load(context.Background(), echo, defaultLimits); err != nil || li.Cached {
				t.Fatalf("first load: %+v, %v (want compiled)", li, err)
			}
			art, rec := cachedFiles(t, dir)
			tc.tamper(t, art, rec)

			var logs testkit.SyncBuffer
			second := newSandbox(t, &Options{CacheDir: dir, Logger: logTo(&logs)})
			li, err := second.Load(context.Background(), echo, defaultLimits)
			if err != nil || li.Cached {
				t.Fatalf("load over a tampered cache: %+v, %v; want recompiled", li, err)
			}
			if !strings.Contains(logs.String(), "refusing compiled component") {
				t.Errorf("no warning about the refused entry; logs:\n%s", logs.String())
			}
			if out := execute(t, second, echo, `{"message":"still works"}`, defaultLimits); out.Failure != nil || out.Output != `{"message":"still works"}` {
				t.Fatalf("tool after recompiling: %+v", out)
			}
			// The recompiled code replaced the bad entry.
			third := newSandbox(t, &Options{CacheDir: dir})
			if li, err := third.Load(context.Background(), echo, defaultLimits); err != nil || !li.Cached {
				t.Fatalf("after healing: %+v, %v; want from disk", li, err)
			}
		})
	}
}

// TestDiskCacheUnderUntrustedAncestor: a cache below a directory others can
// write (not sticky) is not used at all; below a sticky one (like /tmp) it
// is.
func TestDiskCacheUnderUntrustedAncestor(t *testing.T) {
	t.Parallel()
	echo := testkit.Component(t, "echo")
	for _, tc := range []struct {
		mode    os.FileMode
		trusted bool
	}{{0o777, false}, {0o777 | os.ModeSticky, true}, {0o755, true}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "shared")
			if err := os.Mkdir(parent, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(parent, tc.mode); err != nil {
				t.Fatal(err)
			}
			var logs testkit.SyncBuffer
			sb := newSandbox(t, &Options{CacheDir: filepath.Join(parent, "cache"), Logger: logTo(&logs)})
			if got := sb.cache.disk != nil; got != tc.trusted {
				t.Fatalf("disk cache enabled = %v, want %v; logs:\n%s", got, tc.trusted, logs.String())
			}
			if !tc.trusted && !strings.Contains(logs.String(), "not sticky") {
				t.Errorf("the warning does not say why; logs:\n%s", logs.String())
			}
			if out := execute(t, sb, echo, `{"message":"x"}`, defaultLimits); out.Failure != nil {
				t.Fatal(out.Failure)
			}
		})
	}
}

// loadSizes returns the compiled size of each tool.
func loadSizes(t *testing.T, tools ...string) map[string]int64 {
	t.Helper()
	sb := newSandbox(t, nil)
	sizes := map[string]int64{}
	for _, p := range tools {
		l, err := sb.cache.get(context.Background(), p, "")
		if err != nil {
			t.Fatal(err)
		}
		sizes[p] = l.size
	}
	return sizes
}

func cachedPaths(c *cache) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]bool{}
	for p, e := range c.entries {
		if e.lru != nil {
			m[p] = true
		}
	}
	return m
}

// TestMemoryCacheEvictsLeastRecentlyUsed: over the byte limit, the entry
// used least recently goes, and the total stays within the limit.
func TestMemoryCacheEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	a, b, c := testkit.Component(t, "echo"), testkit.Component(t, "toolerr"), testkit.Component(t, "logger")
	sizes := loadSizes(t, a, b, c)
	limit := sizes[a] + sizes[b] + sizes[c] - 1
	sb := newSandbox(t, &Options{MaxCacheBytes: limit})
	ctx := context.Background()
	for _, p := range []string{a, b, a, c} { // a used after b: b is the oldest when c arrives
		if _, err := sb.cache.get(ctx, p, ""); err != nil {
			t.Fatal(err)
		}
	}
	got := cachedPaths(sb.cache)
	if !got[a] || got[b] || !got[c] {
		t.Fatalf("cached %v; want %s and %s, %s evicted", got, filepath.Base(a), filepath.Base(c), filepath.Base(b))
	}
	if sb.cache.bytes > limit {
		t.Fatalf("cache holds %d bytes, over its %d limit", sb.cache.bytes, limit)
	}
	// The evicted tool still loads (again) and runs.
	if out := execute(t, sb, b, "{}", defaultLimits); out.Failure == nil || out.Failure.Kind != KindTool {
		t.Fatalf("evicted tool: %+v", out)
	}
}

// TestEvictedToolStaysValid: a Tool whose version the cache evicted keeps
// working for as long as the caller holds it; once released, its code is
// freed.
func TestEvictedToolStaysValid(t *testing.T) {
	t.Parallel()
	echo, other := testkit.Component(t, "echo"), testkit.Component(t, "toolerr")
	sb := newSandbox(t, &Options{MaxCacheBytes: 1}) // every load evicts the one before
	ctx := context.Background()
	tool, err := sb.Open(ctx, echo, defaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.cache.get(ctx, other, ""); err != nil {
		t.Fatal(err)
	}
	if got := cachedPaths(sb.cache); got[echo] {
		t.Fatalf("echo not evicted: %v", got)
	}
	for range 3 {
		runtime.GC() // would free the code if the cache had let go of a held version
	}
	out, err := tool.Execute(ctx, Call{Limits: defaultLimits, Input: `{"message":"held"}`})
	if err != nil || out.Output != `{"message":"held"}` {
		t.Fatalf("evicted but held: %+v, %v", out, err)
	}
	runtime.KeepAlive(tool)
	tool = nil
	// Released: the collector frees it (generous bound: only the "it ended"
	// matters).
	deadline := time.Now().Add(30 * time.Second)
	for {
		runtime.GC()
		sb.cache.mu.Lock()
		n, held := len(sb.cache.evicted), sb.cache.evictedBytes
		sb.cache.mu.Unlock()
		if n == 0 && held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("evicted code never freed: %d components, %d bytes", n, held)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMemoryCacheHammer: many goroutines open and run several tools while a
// byte limit about the size of one compiled tool forces evictions all the
// time. Every call must run the right tool to its right end; none may see
// freed code (ErrStale) or a torn entry. Run with -race.
func TestMemoryCacheHammer(t *testing.T) {
	t.Parallel()
	tools := map[string]struct {
		path  string
		input string
		check func(Outcome) error
	}{}
	add := func(name, input string, check func(Outcome) error) {
		tools[name] = struct {
			path  string
			input string
			check func(Outcome) error
		}{testkit.Component(t, name), input, check}
	}
	add("echo", `{"message":"hammer"}`, func(o Outcome) error {
		if o.Failure != nil || o.Output != `{"message":"hammer"}` {
			return fmt.Errorf("echo: %+v", o)
		}
		return nil
	})
	add("toolerr", "{}", func(o Outcome) error {
		if o.Failure == nil || o.Failure.Kind != KindTool {
			return fmt.Errorf("toolerr: %+v", o)
		}
		return nil
	})
	add("logger", "{}", func(o Outcome) error {
		if o.Failure != nil || len(o.Logs) != 4 {
			return fmt.Errorf("logger: %+v", o)
		}
		return nil
	})
	add("trap", "{}", func(o Outcome) error {
		if o.Failure == nil || o.Failure.Kind != KindTrap {
			return fmt.Errorf("trap: %+v", o)
		}
		return nil
	})
	var paths []string
	for _, tl := range tools {
		paths = append(paths, tl.path)
	}
	sizes := loadSizes(t, paths...)
	var largest int64
	for _, s := range sizes {
		largest = max(largest, s)
	}
	sb := newSandbox(t, &Options{MaxCacheBytes: largest * 3 / 2})

	names := []string{"echo", "toolerr", "logger", "trap"}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range 30 {
				tl := tools[names[(g+i)%len(names)]]
				var out Outcome
				var err error
				if i%2 == 0 {
					out, err = sb.Execute(ctx, Call{Path: tl.path, Limits: defaultLimits, Input: tl.input})
				} else {
					var tool *Tool
					tool, err = sb.Open(ctx, tl.path, defaultLimits)
					if err == nil {
						runtime.Gosched() // let others evict it between Open and Execute
						out, err = tool.Execute(ctx, Call{Limits: defaultLimits, Input: tl.input})
					}
				}
				if err == nil {
					err = tl.check(out)
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d call %d: %w", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	sb.cache.mu.Lock()
	evictions, held, limit := sb.cache.evictions, sb.cache.bytes, sb.cache.maxBytes
	sb.cache.mu.Unlock()
	if evictions == 0 {
		t.Errorf("no evictions: the test did not exercise the limit")
	}
	if held > limit {
		t.Errorf("cache holds %d bytes, over its %d limit", held, limit)
	}
	t.Logf("%d evictions", evictions)
}

// writeInPlace truncates path and writes b into the same inode, as a build
// tool that does not rename would.
func writeInPlace(t *testing.T, path string, b []byte) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestInPlaceWriteIsRetried: a call that arrives while a component is being
// rewritten in place (first half written, second not yet) waits for the
// writer instead of reporting the tool invalid.
func TestInPlaceWriteIsRetried(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(testkit.Component(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, nil)
	// The hook below finishes the write; a long settle time keeps a slow
	// machine (a pause between writing and loading) from mattering.
	sb.cache.settleTime = time.Minute
	for _, tc := range []struct {
		name  string
		first []byte // what the call sees
	}{{"empty", nil}, {"first half", b[:len(b)/2]}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tool.wasm")
			f := writeInPlace(t, path, tc.first)
			defer f.Close()
			// The writer finishes while the call waits: the hook runs when
			// the call has seen the half-written file and is about to wait.
			var once sync.Once
			waited := false
			sb.cache.onSettle = func() {
				once.Do(func() {
					waited = true
					if _, err := f.Write(b[len(tc.first):]); err != nil {
						t.Error(err)
					}
				})
			}
			defer func() { sb.cache.onSettle = nil }()
			out := execute(t, sb, path, `{"message":"whole"}`, defaultLimits)
			if out.Failure != nil || out.Output != `{"message":"whole"}` {
				t.Fatalf("call during an in-place write: %+v", out)
			}
			if !waited {
				t.Fatal("the call never saw the half-written file; the test proved nothing")
			}
		})
	}
}

// TestInPlaceWriteRetryIsBounded: a file that stays broken is reported
// invalid once it has been quiet for the settle time, and a caller's
// context ends the wait before that.
func TestInPlaceWriteRetryIsBounded(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := filepath.Join(t.TempDir(), "junk.wasm")
	writeInPlace(t, path, []byte("not wasm")).Close()
	start := time.Now()
	out := execute(t, sb, path, "{}", defaultLimits)
	if out.Failure == nil || out.Failure.Kind != KindInvalid || !strings.Contains(out.Failure.Message, "not a WebAssembly component") {
		t.Fatalf("junk: %+v", out)
	}
	// Generous: it must end, at about the settle time.
	if d := time.Since(start); d > sb.cache.settleTime+30*time.Second {
		t.Fatalf("took %v", d)
	}

	sb.cache.settleTime = time.Hour // would wait that long without ctx
	writeInPlace(t, path, []byte("still not wasm")).Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := sb.Execute(ctx, Call{Path: path, Limits: defaultLimits, Input: "{}"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Execute while waiting for a file to settle: %v, want the context's error", err)
	}
}
