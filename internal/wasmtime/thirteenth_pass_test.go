package wasmtime

// Tests of the thirteenth mutation pass (docs/security-tests.md,
// "Thirteenth pass: the engine"), where the guest is the adversary: each
// guards a promise that a bug planted in this package broke while every
// earlier test stayed green.

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// epochWatchdog advances the engine's epoch every 500 ms once 3 s have
// passed, until the test ends: a guest whose deadline the engine's timer
// failed to reach then still stops (its epoch check finds the deadline
// passed), so that a test fails on the time taken instead of hanging.
func epochWatchdog(t *testing.T, e *Engine) {
	t.Helper()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-done:
			return
		case <-time.After(3 * time.Second):
		}
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			e.IncrementEpoch()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
	})
}

// runLoop calls the loop component's execute in s (instantiated already)
// and checks that it stopped at its deadline, 100 ms after start, within
// 2 s.
func runLoop(t *testing.T, fn *Func, s *Store, start time.Time, what string) {
	t.Helper()
	_, err := fn.Call(String("{}"))
	took := time.Since(start)
	if err == nil {
		t.Fatalf("%s: the loop returned", what)
	}
	if s.StopReason() != StopDeadline {
		t.Fatalf("%s: stop reason %v (%v); want deadline", what, s.StopReason(), err)
	}
	if took > 2*time.Second {
		t.Errorf("%s: a runaway guest under a 100ms deadline ran %v", what, took)
	}
}

// TestDeadlineHoldsWhateverTheEpochDid: the engine's epoch is shared by
// every store and advances only at a deadline (the engine's one timer) or
// an Interrupt. A runaway guest still stops at its own deadline when the
// timer already fired once for an earlier call, when it fired for another
// store's earlier deadline, and when the epoch advanced for another store
// before the call ran; and a store without a deadline is never stopped by
// the epoch advancing for others.
func TestDeadlineHoldsWhateverTheEpochDid(t *testing.T) {
	f := newFixture(t, nil)
	epochWatchdog(t, f.engine)
	loop := f.component(t, "loop")

	t.Run("AfterTheTimerFired", func(t *testing.T) {
		// The first call's deadline fires the timer with nothing left to
		// wait for; the second must set it again.
		f.loopUntilDeadline(t, loop, 2*time.Second, " (first call)")
		f.loopUntilDeadline(t, loop, 2*time.Second, " (second call, after the engine's timer fired)")
	})

	t.Run("BehindAnotherStoresDeadline", func(t *testing.T) {
		// Another store's deadline, 20 ms away, passes while the loop
		// runs: the timer fires for it and must be set again for the
		// loop's own.
		other, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 1 << 20, Deadline: time.Now().Add(20 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		f.loopUntilDeadline(t, loop, 2*time.Second, " behind another store's deadline that passed during the call")
	})

	t.Run("AfterAnEpochStep", func(t *testing.T) {
		// The epoch advances once (another store is interrupted) after
		// this store was created: its first epoch check finds nothing to
		// stop for and must re-arm for the very next step, the one its
		// deadline brings.
		start := time.Now()
		s, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 16 << 20, Deadline: start.Add(100 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		other, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		other.Interrupt()
		inst, err := f.linker.Instantiate(s, loop)
		if err != nil {
			t.Fatal(err)
		}
		fn, err := inst.Func("execute")
		if err != nil {
			t.Fatal(err)
		}
		runLoop(t, fn, s, start, "after one epoch step")
	})

	t.Run("NoDeadlineIsNotAPassedOne", func(t *testing.T) {
		echo := f.component(t, "echo")
		s, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		inst, err := f.linker.Instantiate(s, echo)
		if err != nil {
			t.Fatal(err)
		}
		fn, err := inst.Func("execute")
		if err != nil {
			t.Fatal(err)
		}
		other, err := NewStore(f.engine, &StoreOptions{MemoryLimit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		other.Interrupt()
		v, err := fn.Call(String(`{"message":"m"}`))
		if err != nil || s.StopReason() != StopNone {
			t.Fatalf("a store without a deadline, after another store's interrupt: %v (stop reason %v); want the call to run", err, s.StopReason())
		}
		if v.Kind != KindResult || !v.OK || v.Payload.Str != `{"message":"m"}` {
			t.Fatalf("got %+v", v)
		}
	})
}

// TestMemoryCeilingAtItsEdge: a store may hold exactly MemoryLimit bytes of
// linear memory; one byte less refuses the same call, recorded as a denial.
func TestMemoryCeilingAtItsEdge(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "echo")
	in := String(`{"message":"m"}`)
	_, s, err := f.call(t, c, &StoreOptions{MemoryLimit: 16 << 20}, "execute", in)
	if err != nil {
		t.Fatal(err)
	}
	peak := s.MemoryPeak()
	if peak == 0 {
		t.Fatal("echo's memory peak is 0")
	}
	_, s, err = f.call(t, c, &StoreOptions{MemoryLimit: peak}, "execute", in)
	if err != nil || s.MemoryDenied() {
		t.Fatalf("a call needing %d bytes under a ceiling of exactly %d: %v (denied %v); want it to run", peak, peak, err, s.MemoryDenied())
	}
	if got := s.MemoryPeak(); got != peak {
		t.Errorf("peak %d under the exact ceiling, %d before", got, peak)
	}
	_, s, err = f.call(t, c, &StoreOptions{MemoryLimit: peak - 1}, "execute", in)
	if err == nil || !s.MemoryDenied() {
		t.Fatalf("a call needing %d bytes under a ceiling of %d: %v (denied %v); want the memory ceiling", peak, peak-1, err, s.MemoryDenied())
	}
}

// TestReusedReservationKeepsItsBounds: a released linear memory's
// reservation is kept for the next one (shim.c, the spares). A guest given
// a reservation that an earlier guest had grown to 4 MiB still traps on a
// store just past its own one-page memory (pastend): what the earlier guest
// had made accessible is made inaccessible again, or the guest would use
// memory it was never charged for (compiled code elides bounds checks
// against the reservation and relies on its protection).
func TestReusedReservationKeepsItsBounds(t *testing.T) {
	f := newFixture(t, nil)
	grow, pastend := f.component(t, "memgrow"), f.component(t, "pastend")
	for i := range 3 {
		// memgrow grows its memory until the 4 MiB ceiling refuses it; its
		// store's Close releases the reservation with 4 MiB accessible.
		_, gs, err := f.call(t, grow, &StoreOptions{MemoryLimit: 4 << 20}, "execute", String("{}"))
		if err == nil || !gs.MemoryDenied() {
			t.Fatalf("memgrow: %v, denied %v; want the ceiling", err, gs.MemoryDenied())
		}
		gs.Close()
		v, s, err := f.call(t, pastend, &StoreOptions{MemoryLimit: 4 << 20}, "execute", String("{}"))
		s.Close()
		if err == nil || !strings.Contains(err.Error(), "out of bounds memory access") {
			t.Fatalf("call %d: a store past the end of a 64 KiB memory in a reused reservation: got %+v, %v; want an out of bounds trap", i, v, err)
		}
	}
}

// TestValCheckReachesEveryPart: a value maiden hands to wasmtime (a call's
// argument, a host function's result) is checked in every part, so a
// number out of its kind's range or a name that is not UTF-8 is refused
// with ErrValue naming it, wherever it is nested.
func TestValCheckReachesEveryPart(t *testing.T) {
	bad := String("\xff")
	for name, tc := range map[string]struct {
		v    Val
		want string
	}{
		"s16 over":        {Val{Kind: KindS16, Int: 1 << 15}, "out of range for s16"},
		"s16 under":       {Val{Kind: KindS16, Int: -1<<15 - 1}, "out of range for s16"},
		"s32 over":        {Val{Kind: KindS32, Int: 1 << 31}, "out of range for s32"},
		"u8 over":         {Val{Kind: KindU8, Uint: 256}, "out of range for u8"},
		"u32 over":        {Val{Kind: KindU32, Uint: 1 << 32}, "out of range for u32"},
		"enum case":       {Enum("\xff"), "enum case is not valid UTF-8"},
		"in a list":       {List(String("ok"), bad), "string is not valid UTF-8"},
		"in a tuple":      {Tuple(String("k"), bad), "string is not valid UTF-8"},
		"field name":      {Record(FieldOf("\xff", String("v"))), "field name is not valid UTF-8"},
		"field value":     {Record(FieldOf("k", bad)), "string is not valid UTF-8"},
		"variant case":    {Variant("\xff", nil), "variant case is not valid UTF-8"},
		"variant payload": {Variant("denied", &bad), "string is not valid UTF-8"},
		"some payload":    {Some(bad), "string is not valid UTF-8"},
		"err payload":     {Err(&bad), "string is not valid UTF-8"},
		"flag name":       {Val{Kind: KindFlags, Flags: []string{"a", "\xff"}}, "flag name is not valid UTF-8"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := roundTrip(tc.v)
			if !errors.Is(err, ErrValue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want ErrValue saying %q", err, tc.want)
			}
		})
	}
}

// fetchFixture is a fixture whose http-fetch (maiden:tool/host@0.1.0)
// is fetch.
func fetchFixture(t *testing.T, fetch HostFunc) *fixture {
	t.Helper()
	e, err := NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLinker(e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Close()
		e.Close()
	})
	if err := l.AddWASIP2(); err != nil {
		t.Fatal(err)
	}
	err = l.DefineInstance(hostIface, map[string]HostFunc{
		"log":        func(c *Caller, p []Val) ([]Val, error) { return nil, nil },
		"http-fetch": fetch,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{engine: e, linker: l}
}

// TestHostResultIsChecked: a host function's result is checked before
// wasmtime lowers it into the guest: a string that is not UTF-8 (a fetched
// body, an upstream's error) fails the call with ErrValue as the host
// error, and so does a result missing, and the guest gets nothing.
func TestHostResultIsChecked(t *testing.T) {
	msg := String("not \xffUTF-8")
	f := fetchFixture(t, func(c *Caller, p []Val) ([]Val, error) {
		denied := Variant("denied", &msg)
		return []Val{Err(&denied)}, nil
	})
	v, _, err := f.call(t, f.component(t, "fetcher"), nil, "execute", String("https://example.com/"))
	var werr *Error
	if !errors.As(err, &werr) || !errors.Is(err, ErrValue) || !strings.Contains(err.Error(), "string is not valid UTF-8") {
		t.Fatalf("a host result holding invalid UTF-8: got %+v, %v; want the call failed with ErrValue", v, err)
	}

	f = fetchFixture(t, func(c *Caller, p []Val) ([]Val, error) { return nil, nil })
	v, _, err = f.call(t, f.component(t, "fetcher"), nil, "execute", String("https://example.com/"))
	if !errors.As(err, &werr) || werr.Host == nil || !strings.Contains(err.Error(), "host function returned 0 results, the import declares 1") {
		t.Fatalf("a host function returning no result for http-fetch: got %+v, %v; want the call failed naming the count", v, err)
	}
}

// TestCallArgumentsAreChecked: an argument that cannot cross (a string
// that is not UTF-8) is refused with ErrValue before the guest runs.
func TestCallArgumentsAreChecked(t *testing.T) {
	f := newFixture(t, nil)
	v, _, err := f.call(t, f.component(t, "echo"), nil, "execute", String("{\"message\":\"\xff\"}"))
	if !errors.Is(err, ErrValue) || !strings.Contains(err.Error(), "argument 0: wasmtime: invalid component value: string is not valid UTF-8") {
		t.Fatalf("an argument holding invalid UTF-8: got %+v, %v; want ErrValue naming argument 0", v, err)
	}
}

// TestHostCallArgumentCapAtItsEdge: a host call's arguments that would cost
// the host more than MaxArgumentBytes to copy are refused before maiden
// copies them (the call traps with ErrValue naming the cap, and the host
// function never runs); arguments costing exactly the cap are taken. Past
// TrimArgumentBytes the store reports Lifted, at it not. The biglog tool
// logs one line of as many bytes as its input says; the arguments cost a
// Val each and their bytes (the level's case name, "info", and the
// message).
func TestHostCallArgumentCapAtItsEdge(t *testing.T) {
	// The bounds as documented, spelt out: a bound raised in trim.go must
	// turn this red, not move the test along with it.
	const maxBytes, trimBytes = 64 << 20, 8 << 20
	f := newFixture(t, nil)
	c := f.component(t, "biglog")
	overhead := 2*valCost + len("info")
	run := func(n int) (*Store, int, error) {
		t.Helper()
		for len(f.logs) > 0 {
			<-f.logs
		}
		v, s, err := f.call(t, c, &StoreOptions{MemoryLimit: 80 << 20}, "execute", String(strconv.Itoa(n)))
		if err == nil && (v.Kind != KindResult || !v.OK || v.Payload.Str != "logged") {
			t.Fatalf("message of %d bytes: got %+v", n, v)
		}
		logged := -1
		if len(f.logs) > 0 {
			logged = len(<-f.logs) - len("info:")
		}
		return s, logged, err
	}
	for _, tc := range []struct {
		n      int
		lifted bool
	}{
		{trimBytes - overhead, false},
		{trimBytes - overhead + 1, true},
		{maxBytes - overhead, true},
	} {
		s, logged, err := run(tc.n)
		if err != nil || logged != tc.n {
			t.Fatalf("arguments costing %d bytes (cap %d): %v, logged %d bytes; want the line logged whole", tc.n+overhead, maxBytes, err, logged)
		}
		if s.Lifted() != tc.lifted {
			t.Errorf("arguments costing %d bytes: Lifted() = %v; want %v (past %d)", tc.n+overhead, s.Lifted(), tc.lifted, trimBytes)
		}
	}
	n := maxBytes - overhead + 1
	_, logged, err := run(n)
	if logged >= 0 {
		t.Fatalf("arguments costing %d bytes, over the %d cap: the host function got a line of %d bytes", n+overhead, maxBytes, logged)
	}
	if !errors.Is(err, ErrValue) || !strings.Contains(err.Error(), "more than 64 MiB") {
		t.Fatalf("arguments costing %d bytes, over the %d cap: got %v; want ErrValue naming the cap", n+overhead, maxBytes, err)
	}
	TrimHeap()
}

// TestStoreNeedsAMemoryLimit: a store is never created without a ceiling,
// whatever else its options say.
func TestStoreNeedsAMemoryLimit(t *testing.T) {
	f := newFixture(t, nil)
	s, err := NewStore(f.engine, &StoreOptions{Deadline: time.Now().Add(time.Minute), Instances: 1})
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, ErrMemoryLimit) {
		t.Fatalf("NewStore with MemoryLimit 0: %v; want ErrMemoryLimit", err)
	}
}

// TestReadingsKeptAtClose: what stopped a store, whether its ceiling
// refused memory, and its peak are still told after Close, as they were at
// Close (the state they are read from is freed then).
func TestReadingsKeptAtClose(t *testing.T) {
	f := newFixture(t, nil)
	_, s, err := f.call(t, f.component(t, "memgrow"), &StoreOptions{MemoryLimit: 4 << 20}, "execute", String("{}"))
	if err == nil {
		t.Fatal("memgrow succeeded")
	}
	denied, peak := s.MemoryDenied(), s.MemoryPeak()
	s.Close()
	if !denied || s.MemoryDenied() != denied || s.MemoryPeak() != peak {
		t.Errorf("memgrow: denied %v, peak %d before Close; %v, %d after", denied, peak, s.MemoryDenied(), s.MemoryPeak())
	}
	s = f.loopUntilDeadline(t, f.component(t, "loop"), 2*time.Second, "")
	s.Close()
	if got := s.StopReason(); got != StopDeadline {
		t.Errorf("loop: stop reason %v after Close; want deadline, as before it", got)
	}
}

// TestExitStatusIsReported: a guest that calls WASI's exit instead of
// returning fails the call, and the error carries the status it passed
// (0 for exit(ok), 1 for exit(err)); a trap carries none.
func TestExitStatusIsReported(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "exiter")
	for in, want := range map[string]int{"ok": 0, "no": 1} {
		v, _, err := f.call(t, c, nil, "execute", String(in))
		var werr *Error
		if !errors.As(err, &werr) || werr.ExitStatus == nil || *werr.ExitStatus != want {
			t.Fatalf("exiter %q: got %+v, %#v; want an error with exit status %d", in, v, err, want)
		}
	}
	_, _, err := f.call(t, f.component(t, "trap"), nil, "execute", String("{}"))
	var werr *Error
	if !errors.As(err, &werr) || werr.ExitStatus != nil {
		t.Fatalf("trap: got %#v; want an error without an exit status", err)
	}
}

// TestImportTypesRenderedWhole: a function's type is rendered whole, every
// nested type spelt out, as the sandbox's contract check compares them: a
// list<u8> body must not read like a list of anything else.
func TestImportTypesRenderedWhole(t *testing.T) {
	f := newFixture(t, nil)
	imps, err := f.component(t, "fetcher").Imports()
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, imp := range imps {
		for _, e := range imp.Exports {
			if imp.Name == hostIface && e.Name == "http-fetch" {
				got = e.Type
			}
		}
	}
	want := "func(req: record { method: string, url: string, headers: list<tuple<string, string>>, body: list<u8>, credential: option<string> })" +
		" -> result<record { status: u16, headers: list<tuple<string, string>>, body: list<u8> }, variant { denied(string), timeout, too-large, failed(string) }>"
	if got != want {
		t.Errorf("http-fetch's type\n got %s\nwant %s", got, want)
	}
}

// TestMemoryPastTheResidentBudgetIsFresh: a released reservation's
// resident pages are zeroed in place only up to maiden's 256 MiB resident
// budget (shim.c, MAIDEN_KEEP_RESIDENT_MAX); the pages past it must be
// dropped, the last run of them too. bigdirty grows to 260 MiB, touches
// every page and marks the last byte; the next guest, given the same
// reservation, must find the last byte zero.
func TestMemoryPastTheResidentBudgetIsFresh(t *testing.T) {
	f := newFixture(t, nil)
	c := f.component(t, "bigdirty")
	for i := range 2 {
		v, s, err := f.call(t, c, &StoreOptions{MemoryLimit: 300 << 20}, "execute", String("mark"))
		s.Close()
		if err != nil || v.Kind != KindResult || !v.OK || v.Payload.Str != "marked" {
			t.Fatalf("call %d, mark: got %+v, %v", i, v, err)
		}
		v, s, err = f.call(t, c, &StoreOptions{MemoryLimit: 300 << 20}, "execute", String("check"))
		s.Close()
		if err != nil || v.Kind != KindResult || !v.OK || v.Payload.Str != "clean" {
			t.Fatalf("call %d: the guest after one that marked the last byte of its 260 MiB memory: got %+v (%s), %v; want clean", i, v, payloadText(v), err)
		}
	}
	TrimHeap()
}

func payloadText(v Val) string {
	if v.Payload == nil {
		return ""
	}
	return v.Payload.Str
}
