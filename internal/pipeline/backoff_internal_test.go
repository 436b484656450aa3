package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/testkit"
)

// TestCrashCoolDown: CrashLimit lost workers in a row start a cool-down in
// which calls are refused (the message names the tool, the count and the
// end); a call that keeps its worker resets the count; after a cool-down
// one more death starts another, twice as long.
func TestCrashCoolDown(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	c := &crashes{now: func() time.Time { return now }}
	for range CrashLimit - 1 {
		c.record("bomb", "v1", true)
	}
	c.record("bomb", "v1", false) // a call that kept its worker: the count starts over
	for i := range CrashLimit {
		if msg := c.refusal("bomb", "v1"); msg != "" {
			t.Fatalf("refused after %d deaths in a row (limit %d): %s", i, CrashLimit, msg)
		}
		c.record("bomb", "v1", true)
	}
	msg := c.refusal("bomb", "v1")
	for _, want := range []string{`tool "bomb"`, "3 calls in a row", "refused for 10s", "until 2026-12-02T01:00:10Z"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q lacks %q", msg, want)
		}
	}
	if other := c.refusal("echo", "v1"); other != "" {
		t.Errorf("another tool is refused: %s", other)
	}
	now = now.Add(CrashCoolDown)
	if msg := c.refusal("bomb", "v1"); msg != "" {
		t.Fatalf("still refused after the cool-down: %s", msg)
	}
	c.record("bomb", "v1", true) // one more death after a cool-down
	if msg := c.refusal("bomb", "v1"); !strings.Contains(msg, "refused for 20s") {
		t.Errorf("after a cool-down one death should start a doubled one, got %q", msg)
	}
}

// TestCrashCoolDownPerVersion: the cool-down is of the version whose calls
// lost their workers. Another component under the same tool name (rebuilt,
// or agent.toml pointing elsewhere) is not refused, and its record starts
// clean: one death of it does not start a cool-down.
func TestCrashCoolDownPerVersion(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	c := &crashes{now: func() time.Time { return now }}
	for range CrashLimit {
		c.record("bomb", "v1", true)
	}
	if c.refusal("bomb", "v1") == "" {
		t.Fatal("v1 not refused after its cool-down started")
	}
	if msg := c.refusal("bomb", "v2"); msg != "" {
		t.Fatalf("the swapped component inherits the old one's cool-down: %s", msg)
	}
	c.record("bomb", "v2", true)
	if msg := c.refusal("bomb", "v2"); msg != "" {
		t.Fatalf("one death of the new version started a cool-down (the old one's count carried over): %s", msg)
	}
	if !c.troubled("bomb") {
		t.Error("the new version lost its worker but is not in trouble")
	}
	// The new version's own deaths count, from one, to its own cool-down
	// (a first one: 10 s, not the old version's doubled 20 s).
	for range CrashLimit - 1 {
		c.record("bomb", "v2", true)
	}
	if msg := c.refusal("bomb", "v2"); !strings.Contains(msg, "refused for 10s") {
		t.Fatalf("after %d deaths of the new version: %q, want its own first cool-down", CrashLimit, msg)
	}
	now = now.Add(CrashCoolDown)
	c.record("bomb", "v2", false)
	if c.troubled("bomb") {
		t.Error("still in trouble after a call kept its worker")
	}
}

// TestAdmissionShare: a tool that floods the turns gets at most its share
// (three quarters from four turns up), so another tool's call finds a turn
// at once; a freed turn goes to the waiting tool that runs the fewest calls,
// whatever the order they queued in.
func TestAdmissionShare(t *testing.T) {
	a := newAdmission(8, 100)
	if a.perTool != 6 {
		t.Fatalf("perTool = %d, want 6 of 8", a.perTool)
	}
	ctx := context.Background()
	var bombs []func()
	for range 6 {
		r, err := a.enter(ctx, "bomb", "")
		if err != nil {
			t.Fatal(err)
		}
		bombs = append(bombs, r)
	}
	// The seventh bomb waits though two turns are free.
	got := make(chan func(), 8)
	go func() {
		r, err := a.enter(ctx, "bomb", "")
		if err != nil {
			t.Error(err)
			return
		}
		got <- r
	}()
	waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.queue.Len() == 1 })
	// echo finds a free turn at once, though a bomb queued before it.
	echo, err := a.enter(ctx, "echo", "")
	if err != nil {
		t.Fatal(err)
	}
	// A second echo too: eight turns, six bombs, two echoes.
	echo2, err := a.enter(ctx, "echo", "")
	if err != nil {
		t.Fatal(err)
	}
	// Now every turn is taken: a third echo queues behind the bomb.
	go func() {
		r, err := a.enter(ctx, "echo", "")
		if err != nil {
			t.Error(err)
			return
		}
		got <- r
	}()
	waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.queue.Len() == 2 })
	// A freed echo turn: the bomb waiting is at its share, so the echo
	// that queued after it takes the turn.
	echo2()
	r := <-got
	a.mu.Lock()
	if a.byTool["echo"] != 2 || a.byTool["bomb"] != 6 || a.queue.Len() != 1 {
		t.Errorf("after an echo turn was freed: running %v, %d waiting; want echo 2, bomb 6, the bomb waiting", a.byTool, a.queue.Len())
	}
	a.mu.Unlock()
	// A freed bomb turn goes to the waiting bomb.
	bombs[0]()
	r2 := <-got
	a.mu.Lock()
	if a.byTool["bomb"] != 6 || a.queue.Len() != 0 {
		t.Errorf("after a bomb turn was freed: running %v, %d waiting", a.byTool, a.queue.Len())
	}
	a.mu.Unlock()
	for _, f := range append(bombs[1:], echo, r, r2) {
		f()
	}
	if n := a.active(); n != 0 {
		t.Errorf("%d calls active after every turn was given back", n)
	}
}

// TestAdmissionFewestFirst: of two waiting calls that both fit their
// tools' shares, a freed turn goes to the one whose tool runs fewer calls,
// though the other queued first.
func TestAdmissionFewestFirst(t *testing.T) {
	a := newAdmission(8, 100)
	ctx := context.Background()
	var heavy []func()
	for range 5 {
		r, err := a.enter(ctx, "heavy", "")
		if err != nil {
			t.Fatal(err)
		}
		heavy = append(heavy, r)
	}
	for range 3 {
		if _, err := a.enter(ctx, "light", ""); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan string, 2)
	wait := func(tool string, queued int) {
		go func() {
			if _, err := a.enter(ctx, tool, ""); err != nil {
				t.Error(err)
				return
			}
			got <- tool
		}()
		waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.queue.Len() == queued })
	}
	wait("heavy", 1) // queued first; heavy runs 5 of its 6
	wait("light", 2) // queued second; light runs 3
	heavy[0]()       // heavy now runs 4, light 3: light is served
	if first := <-got; first != "light" {
		t.Errorf("the freed turn went to %s; want light, the tool running fewer calls", first)
	}
}

// TestAdmissionTroubledToolOneAtATime: a tool whose last call lost its
// worker runs one call at a time (its second call waits though seven turns
// are free, and another tool's call does not), until a call keeps its
// worker; through the Host the verdict is the crash record's.
func TestAdmissionTroubledToolOneAtATime(t *testing.T) {
	var c crashes
	a := newAdmission(8, 100)
	a.troubled = c.troubled
	ctx := context.Background()
	c.record("bomb", "v1", true) // one lost worker
	first, err := a.enter(ctx, "bomb", "")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		r, err := a.enter(ctx, "bomb", "")
		if err != nil {
			t.Error(err)
			return
		}
		got <- r
	}()
	waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.queue.Len() == 1 })
	echo, err := a.enter(ctx, "echo", "")
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	if a.byTool["bomb"] != 1 || a.queue.Len() != 1 {
		t.Errorf("a troubled tool: running %v, %d waiting; want one bomb running, one waiting", a.byTool, a.queue.Len())
	}
	a.mu.Unlock()
	c.record("bomb", "v1", false) // the running call kept its worker: no longer troubled
	first()
	second := <-got
	// Its share is back: more bombs run at once.
	third, err := a.enter(ctx, "bomb", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(){second, third, echo} {
		f()
	}
	if n := a.active(); n != 0 {
		t.Errorf("%d calls active after every turn was given back", n)
	}
}

// waitFor polls cond (an observable state of another goroutine) for up to
// 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestUnprovenToolOneAtATime: a WebAssembly tool none of whose calls has
// yet ended keeping its worker runs one call at a time (its first burst
// cannot be six argument bombs at once, before any worker died and marked
// it); another tool's call does not wait; once a call of it ended (kept
// its worker), its share is back. A call that lost its worker proves
// nothing. Wrapped CLIs, built-ins and names no tool has keep their share.
func TestUnprovenToolOneAtATime(t *testing.T) {
	root := testkit.RepoRoot(t)
	dir := t.TempDir()
	body := fmt.Sprintf("version = 1\n[tools.echo]\npath = %q\n[tools.other]\npath = %q\n[clis.git]\npath = \"/usr/bin/git\"\ncommand_file = %q\n",
		testkit.Component(t, "echo"), testkit.Component(t, "echo"), filepath.Join(root, "examples/git/git.command.json"))
	h, _ := testHost(t, dir, body, &Options{Isolation: api.InProcess, CacheDir: t.TempDir(), MaxConcurrent: 8})
	defer h.Close(t.Context())
	for name, want := range map[string]bool{"echo": true, "other": true, "git": false, "fs_read": false, "nosuch": false} {
		if got := h.adm.troubled(name); got != want {
			t.Errorf("oneAtATime(%q) before any call = %v, want %v", name, got, want)
		}
	}
	h.crashes.record("other", "v1", true) // lost its worker: not proven
	if !h.adm.troubled("other") {
		t.Error("a tool whose only call lost its worker counts as proven")
	}

	ctx := context.Background()
	first, err := h.adm.enter(ctx, "echo", "")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		r, err := h.adm.enter(ctx, "echo", "")
		if err != nil {
			t.Error(err)
			return
		}
		got <- r
	}()
	waitFor(t, func() bool { h.adm.mu.Lock(); defer h.adm.mu.Unlock(); return h.adm.queue.Len() == 1 })
	git, err := h.adm.enter(ctx, "git", "")
	if err != nil {
		t.Fatal(err)
	}
	git2, err := h.adm.enter(ctx, "git", "")
	if err != nil {
		t.Fatal(err)
	}
	h.adm.mu.Lock()
	if h.adm.byTool["echo"] != 1 || h.adm.byTool["git"] != 2 || h.adm.queue.Len() != 1 {
		t.Errorf("unproven echo: running %v, %d waiting; want one echo running and one waiting, two git running", h.adm.byTool, h.adm.queue.Len())
	}
	h.adm.mu.Unlock()
	first()
	second := <-got
	for _, f := range []func(){second, git, git2} {
		f()
	}

	// One call of echo ends (keeping its worker): echo's share is back.
	if res, err := h.Call(ctx, Call{Tool: "echo", Input: `{"message":"hi"}`}); err != nil || !res.OK {
		t.Fatalf("echo: %v %+v", err, res.Error)
	}
	if h.adm.troubled("echo") {
		t.Fatal("echo still runs one call at a time after a call of it ended")
	}
	var releases []func()
	for range 3 {
		r, err := h.adm.enter(ctx, "echo", "")
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	for _, r := range releases {
		r()
	}
	if n := h.adm.active(); n != 0 {
		t.Errorf("%d calls active after every turn was given back", n)
	}
}

// TestAdmissionFairBetweenAgents: one agent flooding the host cannot
// lock another out. Its calls hold at most three quarters of the queue's
// places, so the other's call still finds one (and a free turn, if there
// is one); and a freed turn goes to the waiting call of the agent running
// fewer calls, though the flooding agent's calls of the same tool queued
// first.
func TestAdmissionFairBetweenAgents(t *testing.T) {
	a := newAdmission(4, 4) // three calls of one tool at once, three places of one agent
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var flood []func()
	for _, tool := range []string{"x", "x", "y"} {
		r, err := a.enter(ctx, tool, "flood")
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, r)
	}
	if _, err := a.enter(ctx, "x", "b"); err != nil { // the fourth turn
		t.Fatal(err)
	}
	got := make(chan string, 8)
	wait := func(agent string, queued int) {
		go func() {
			if _, err := a.enter(ctx, "z", agent); err != nil {
				if ctx.Err() == nil {
					t.Error(err)
				}
				return
			}
			got <- agent
		}()
		waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.queue.Len() == queued })
	}
	for i := range 3 {
		wait("flood", i+1)
	}
	// The flooding agent's fourth waiting call would fill the queue: it
	// is refused, naming its share, and the last place stays another's.
	// (Its context is over: had it been queued, it would end at once as
	// canceled rather than wait.)
	over, stop := context.WithCancel(ctx)
	stop()
	if _, err := a.enter(over, "z", "flood"); !errors.Is(err, ErrOverloaded) || !strings.Contains(err.Error(), "3 calls of this agent already wait, its share of the 4 places") {
		t.Fatalf("the flooding agent's call past its share of the queue: %v", err)
	}
	wait("b", 4)
	flood[2]() // a turn frees: flood runs 2, b runs 1
	if first := <-got; first != "b" {
		t.Errorf("the freed turn went to %s; want b, the agent running fewer calls", first)
	}
}
