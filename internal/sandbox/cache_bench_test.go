package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/compcache"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/wasmtime"
)

// BenchmarkDiskLoad compares the two ways of loading a verified artifact
// from the disk cache, for a JavaScript tool (~45 MB of compiled code):
// bytes reads the file once, hashes those bytes and hands them to wasmtime
// (which copies them into its own mapping); fd hashes the open file and has
// wasmtime map that same file through /proc/self/fd/N.
//
//	go test ./internal/sandbox -run '^$' -bench DiskLoad -benchtime 20x
func BenchmarkDiskLoad(b *testing.B) {
	engine, err := wasmtime.NewEngine(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer engine.Close()
	wasm, err := os.ReadFile(testkit.Component(b, "js/hello"))
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(wasm)
	digest := hex.EncodeToString(sum[:])
	disk, err := compcache.Open(b.TempDir(), engine.Fingerprint(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer disk.Close()
	{
		comp, err := engine.NewComponent(wasm)
		if err != nil {
			b.Fatal(err)
		}
		ser, err := comp.Serialize()
		comp.Close()
		if err != nil {
			b.Fatal(err)
		}
		if err := disk.Put(digest, ser); err != nil {
			b.Fatal(err)
		}
		b.Logf("artifact: %d bytes", len(ser))
	}
	b.Run("bytes", func(b *testing.B) {
		for b.Loop() {
			ser, err := disk.Load(digest)
			if err != nil {
				b.Fatal(err)
			}
			comp, err := engine.DeserializeComponent(ser)
			if err != nil {
				b.Fatal(err)
			}
			comp.Close()
		}
		ser, _ := disk.Load(digest)
		before := rssAnon(b)
		comp, _ := engine.DeserializeComponent(ser)
		ser = nil
		b.ReportMetric(float64(rssAnon(b)-before)/(1<<20), "anonMiB/load")
		comp.Close()
	})
	b.Run("fd", func(b *testing.B) {
		for b.Loop() {
			a, err := disk.OpenFile(digest)
			if err != nil {
				b.Fatal(err)
			}
			comp, err := engine.DeserializeComponentFile(a.Path())
			a.Close()
			if err != nil {
				b.Fatal(err)
			}
			comp.Close()
		}
		a, _ := disk.OpenFile(digest)
		before := rssAnon(b)
		comp, _ := engine.DeserializeComponentFile(a.Path())
		a.Close()
		b.ReportMetric(float64(rssAnon(b)-before)/(1<<20), "anonMiB/load")
		comp.Close()
	})
}

// rssAnon reads this process's resident anonymous memory: what a load
// costs each process privately, as opposed to file pages shared through
// the page cache.
func rssAnon(b *testing.B) int64 {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
