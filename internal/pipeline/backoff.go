package pipeline

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Crash back-off (issue 22, finding 5): a tool whose calls cost their
// worker process CrashLimit times in a row has its calls refused at once,
// as kind unavailable, for CrashCoolDown; the first call after the cool-down
// runs again (one death more starts another cool-down, twice as long, up to
// maxCoolDown). Replacing a worker takes a fork, an exec and the loading of
// compiled code: a tool that kills its worker on every call would otherwise
// spend every admission turn on that, and starve the other tools.
//
// The record is of one version of the tool (its component's digest): a
// tool whose component is swapped (rebuilt, or agent.toml pointing at
// another file) starts with a clean record, so the fix of a crashing tool
// runs at once rather than wait out its predecessor's cool-down. Admission,
// which runs before the version is known, treats the tool by name as in
// trouble until a call of it keeps its worker.
const (
	CrashLimit    = 3
	CrashCoolDown = 10 * time.Second
	maxCoolDown   = 5 * time.Minute
)

// crashes counts each tool's consecutive lost workers, and knows which
// tools have had a call that kept its worker.
type crashes struct {
	mu    sync.Mutex
	tools map[string]*crashRecord
	// kept names the tools of which a call ended and kept its worker (or
	// ran in process): proven not to kill it every time. A configured
	// tool's name, set by record, so it grows with the configurations'
	// tools, never with what callers send.
	kept map[string]bool
	now  func() time.Time // time.Now; tests set a clock

	// Every call asks troubled, proven and refusal and tells record: the
	// common answers (no tool in trouble, this one proven) are read
	// without the lock. records is len(tools) and provenSet a copy of
	// kept (replaced, never changed: kept only grows), both written under
	// mu with the maps, so a reader that sees them sees the maps' state
	// at a moment between two writes, as a reader under mu would.
	records   atomic.Int64
	provenSet atomic.Pointer[map[string]bool]
}

type crashRecord struct {
	digest   string // the version whose calls lost workers
	inARow   int
	coolDown time.Duration // the last one given
	until    time.Time     // calls are refused before this
}

// record notes how a call of version digest of tool ended: lost its worker
// or not.
func (c *crashes) record(tool, digest string, lost bool) {
	if !lost && c.records.Load() == 0 && c.proven(tool) {
		return // no record to clear, and kept already: nothing changes
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { c.records.Store(int64(len(c.tools))) }()
	r := c.tools[tool]
	if r != nil && r.digest != digest {
		// Another version: its record is not this one's.
		delete(c.tools, tool)
		r = nil
	}
	if !lost {
		if r != nil {
			delete(c.tools, tool)
		}
		if !c.kept[tool] {
			if c.kept == nil {
				c.kept = map[string]bool{}
			}
			c.kept[tool] = true
			set := maps.Clone(c.kept)
			c.provenSet.Store(&set)
		}
		return
	}
	if c.tools == nil {
		c.tools = map[string]*crashRecord{}
	}
	if r == nil {
		r = &crashRecord{digest: digest}
		c.tools[tool] = r
	}
	r.inARow++
	if r.inARow >= CrashLimit {
		r.coolDown = min(max(CrashCoolDown, 2*r.coolDown), maxCoolDown)
		r.until = c.clock().Add(r.coolDown)
		r.inARow = CrashLimit - 1 // after the cool-down, one more death is enough
	}
}

// troubled reports whether tool's last call lost its worker (or a cool-down
// ended with no kept worker since): admission runs its calls one at a
// time, and its calls run at the lowest CPU priority
// (sandbox.Call.LowPriority), so that the deaths and the work before them
// cost other tools' calls as little as the machine allows. The first call
// that keeps its worker ends it. Whatever the version: admission does not
// know it yet.
func (c *crashes) troubled(tool string) bool {
	if c.records.Load() == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tools[tool] != nil
}

// proven reports whether a call of tool has ended keeping its worker
// since this host started.
func (c *crashes) proven(tool string) bool {
	set := c.provenSet.Load()
	return set != nil && (*set)[tool]
}

// oneAtATime names the tools whose calls admission runs one at a time: a
// tool in trouble (above), and a WebAssembly tool not yet proven, none of
// whose calls has yet ended with its worker kept. Without the second, a
// tool's first burst of calls ran up to its share at once (six of eight
// turns), at normal priority, before its first worker died and marked it:
// six host-call argument bombs at once took the harmless echo tool's p99
// to 1-110x its p99 alone (BenchmarkEchoUnderCrashStorm/first-burst).
// The price: the first calls of a new tool (of each tool after a
// restart) wait for the first one to end, once; a call refused before it
// ran (a card, a schema) proves nothing. Wrapped CLIs, MCP imports and
// built-ins run in no worker of the pool and keep their share
// (backend.pooled).
//
// firstCalls holds what that needs (the crash records, the kinds in
// force), not the Host.
type firstCalls struct {
	crashes *crashes
	kinds   *kindsHolder
}

func (f firstCalls) oneAtATime(tool string) bool {
	if f.crashes.troubled(tool) {
		return true
	}
	if f.crashes.proven(tool) {
		return false // whatever its kind: a proven tool keeps its share
	}
	k := f.kinds.cur.Load()
	if k == nil {
		return false
	}
	b, ok := k.byName[tool]
	// another kind, or a name no tool has (refused at once), keeps its
	// share; a WebAssembly tool not yet proven does not
	return ok && b.pooled()
}

// refusal is the message refusing a call of version digest of tool now, or
// "".
func (c *crashes) refusal(tool, digest string) string {
	if c.records.Load() == 0 {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.tools[tool]
	if r == nil || r.digest != digest {
		return ""
	}
	now := c.clock()
	if !now.Before(r.until) {
		return ""
	}
	return fmt.Sprintf("tool %q lost its worker process on %d calls in a row (it crashed, or was killed for its memory, deadline or a protocol violation); its calls are refused for %v, until %s (%v from now), so it cannot starve other tools. Nothing ran; the operator's log names each death",
		tool, CrashLimit, r.coolDown, r.until.UTC().Format(time.RFC3339), r.until.Sub(now).Round(time.Second))
}

func (c *crashes) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// coolDownStage refuses, before anything runs (no middleware, no human asked),
// a call of a tool version in its crash cool-down. It follows
// loadAndValidate, which opened the version in force (from the compile
// cache, for the version that crashed); tools that run in no worker (wrapped
// CLIs, MCP imports) have no record.
type coolDownStage struct{ crashes *crashes }

func (s coolDownStage) refuse(next handler) handler {
	return func(ctx context.Context, inv *invocation) error {
		if inv.opened != nil {
			if msg := s.crashes.refusal(inv.tool.Name, inv.opened.Digest); msg != "" {
				return inv.fail(KindUnavailable, msg)
			}
		}
		return next(ctx, inv)
	}
}

// lowPriorityInTrouble: a tool in trouble's calls run at the lowest CPU
// priority (wasm.go's run). Tests of the back-off itself turn it off
// (export_test.go): on a machine busy with the rest of the suite a bomb at
// SCHED_IDLE reaches its deadline instead of its memory limit, which is
// the point of the priority but not what they check.
var lowPriorityInTrouble = true
