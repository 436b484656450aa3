// Command snaptool reports what a pre-initialised Go tool sees of
// randomness, the clock and the collector, for preinit_test.go: every call
// must get fresh seeds and a clock that works although the runtime started
// in a snapshot taken at build time.
package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand"
	mrand2 "math/rand/v2"
	"runtime"
	"time"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

// initMap is filled while the tool initialises: its iteration order must
// still vary from call to call (the start of an iteration is random).
var initMap = map[int]bool{}

func init() {
	for i := range 64 {
		initMap[i] = true
	}
	maiden.Register(tool{})
}

func main() {}

type input struct {
	Op      string `json:"op"`
	SleepMS int    `json:"sleep_ms,omitempty"`
	AllocMB int    `json:"alloc_mb,omitempty"`
}

// Random is what "random" returns.
type Random struct {
	MathRand   int64  `json:"math_rand"`
	MathRandV2 uint64 `json:"math_rand_v2"`
	Crypto     string `json:"crypto"`
	// MapOrder and InitMapOrder are the first keys a range over a fresh
	// map and over initMap visits.
	MapOrder     []int `json:"map_order"`
	InitMapOrder []int `json:"init_map_order"`
}

// Clock is what "clock" returns.
type Clock struct {
	UnixNano  int64 `json:"unix_nano"`
	SleptNS   int64 `json:"slept_ns"`  // time.Since around time.Sleep
	TimerNS   int64 `json:"timer_ns"`  // time.Since around <-time.After
	TickerNS  int64 `json:"ticker_ns"` // three ticks of a ticker
	Monotonic bool  `json:"monotonic"` // time.Now carries a monotonic reading
	Ordered   bool  `json:"ordered"`   // later readings are not before earlier ones
}

// GC is what "gc" returns.
type GC struct {
	Collections uint32 `json:"collections"`
	Allocated   int    `json:"allocated_mb"`
}

type tool struct{}

func (tool) Describe() string {
	return "Reports randomness, the clock and the collector as a snapshot-started Go tool sees them."
}

func (tool) Schema() string { return maiden.SchemaFor[input]() }

func firstKeys(m map[int]bool) []int {
	var ks []int
	for k := range m {
		ks = append(ks, k)
		if len(ks) == 4 {
			break
		}
	}
	return ks
}

func (tool) Execute(_ context.Context, raw []byte) ([]byte, error) {
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("bad input: %w", err)
	}
	var out any
	switch in.Op {
	case "random":
		b := make([]byte, 16)
		if _, err := crand.Read(b); err != nil {
			return nil, err
		}
		fresh := map[int]bool{}
		for i := range 64 {
			fresh[i] = true
		}
		out = Random{
			MathRand: mrand.Int63(), MathRandV2: mrand2.Uint64(), Crypto: hex.EncodeToString(b),
			MapOrder: firstKeys(fresh), InitMapOrder: firstKeys(initMap),
		}
	case "clock":
		d := time.Duration(in.SleepMS) * time.Millisecond
		var c Clock
		t0 := time.Now()
		c.UnixNano = t0.UnixNano()
		c.Monotonic = t0.String() != t0.Round(0).String()
		time.Sleep(d)
		t1 := time.Now()
		c.SleptNS = int64(t1.Sub(t0))
		<-time.After(d)
		t2 := time.Now()
		c.TimerNS = int64(t2.Sub(t1))
		tk := time.NewTicker(d / 3)
		for range 3 {
			<-tk.C
		}
		tk.Stop()
		t3 := time.Now()
		c.TickerNS = int64(t3.Sub(t2))
		c.Ordered = !t1.Before(t0) && !t2.Before(t1) && !t3.Before(t2)
		out = c
	case "gc":
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var keep [][]byte
		for i := range in.AllocMB {
			b := make([]byte, 1<<20)
			b[i%len(b)] = 1
			keep = append(keep, b)
			if len(keep) > 4 {
				keep = keep[1:] // garbage: the heap stays small only if the collector runs
			}
		}
		runtime.ReadMemStats(&after)
		out = GC{Collections: after.NumGC - before.NumGC, Allocated: in.AllocMB}
	case "hold":
		// Keeps every block: the call's memory ceiling must stop it.
		var keep [][]byte
		for range in.AllocMB {
			b := make([]byte, 1<<20)
			b[0] = 1
			keep = append(keep, b)
		}
		out = GC{Allocated: len(keep)}
	default:
		return nil, fmt.Errorf("unknown op %q", in.Op)
	}
	return json.Marshal(out)
}
