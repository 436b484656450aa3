// Package worker runs tool components in supervised worker processes: the
// second wall. A worker is the maiden binary (or any program whose main
// calls Main) re-executed with an empty environment, confined before its Go
// runtime starts (rlimits, no_new_privs, Landlock, seccomp: see
// confine_linux.c), holding no secrets and no network. It runs one call at a
// time. The parent enforces what a worker cannot be trusted to: the
// deadline (a worker past deadline + grace is killed), memory (RLIMIT_DATA
// set by the parent before each call: memory_mb plus a fixed allowance over
// the worker's resting size), crashes (a worker that dies is the call's
// failure, never the server's), and the network (http-fetch is a request to
// the parent, which runs the egress gate and attaches credentials).
//
// Compilation runs in a fresh worker per component with a CPU-time limit;
// its crash is kind invalid. Compiled code reaches call workers over the
// socket from the parent, so workers open no file at all; the exception is
// a call given WASI preopened directories, which runs in a worker started
// for it alone whose Landlock domain holds exactly those directories
// (preopen.go).
//
//	p, _ := worker.New(&worker.Options{Command: []string{"/usr/bin/maiden"}})
//	t, _ := p.Open(ctx, "/abs/echo.wasm", lim)
//	out, _ := t.Execute(ctx, sandbox.Call{Limits: lim, Input: "{}"})
package worker

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"github.com/maiden-run/maiden/api"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/internal/compcache"
	"github.com/maiden-run/maiden/internal/sandbox"
	"golang.org/x/sys/unix"
)

// Options configure a Pool. nil means all defaults.
type Options struct {
	// Command is the worker's argv; nil means this program (os.Executable),
	// which must call Main first thing in main.
	Command []string
	// Size is how many call workers may exist at once; 0 means 4.
	Size int
	// Logger receives maiden's own diagnostics; nil discards them.
	Logger *slog.Logger
	// OnCompile is told the path of each component about to be compiled
	// because no cache held its code (api.Options.OnCompile); nil: nothing.
	OnCompile func(path string)
	// MaxLogBytes and MaxOutputBytes bound one call's log and result, as in
	// sandbox.Options (0: the sandbox's defaults).
	MaxLogBytes, MaxOutputBytes int
	// Grace is how long past its deadline (or cancellation) a worker may
	// take to answer before it is killed; 0 means 10 ms.
	Grace time.Duration
	// Allowance is the memory a call may use beyond memory_mb (engine
	// bookkeeping, per-instance state, host-call arguments); 0 means
	// DefaultAllowance.
	Allowance uint64
	// CompileCPU bounds the CPU seconds of one compilation; 0 means 300.
	CompileCPU uint64
	// CompileMemory bounds a compiling worker's data memory; 0 means 4 GiB.
	CompileMemory uint64
	// MaxCacheBytes bounds the compiled code the parent holds in memory to
	// hand to workers (LRU by size); 0 means 1 GiB.
	MaxCacheBytes int64
	// CacheDir holds compiled components between runs (the parent reads and
	// writes it; workers open no file). "" keeps them in memory only.
	CacheDir string
	// StartTimeout bounds a worker's start-up; 0 means 10 s.
	StartTimeout time.Duration
}

// DefaultAllowance is the memory a call may use beyond its memory_mb, over
// the worker's resting size: wasmtime's per-store and per-instance state,
// tables, globals, host-call arguments being lifted, Go and Rust runtime
// slack, thread stacks. Measured with memory_mb set to each tool's own
// peak, the smallest allowance that still works is under 64 KiB for the
// WAT and JS echo tools and 4 MiB for the Go one (a new thread's stack);
// 64 MiB matches the most per-instance state wasmscan admits at load.
const DefaultAllowance = 64 << 20

// defaultGrace is Options.Grace when none is given.
const defaultGrace = 10 * time.Millisecond

// The parent waits awake for a call's answer for about the worker's
// typical call time, between minSpin and maxSpin; a worker waits awake for
// workerSpinWait after it answered (see spinReader).
const (
	minSpin        = 100 * time.Microsecond
	maxSpin        = 2 * time.Millisecond
	workerSpinWait = 100 * time.Microsecond
)

// warmLimits bound the describe() that warms a replacement worker.
var warmLimits = sandbox.Limits{Timeout: 5 * time.Second, Memory: 256 << 20}

// maxLoadedPerWorker bounds the compiled components one worker holds.
const maxLoadedPerWorker = 8

// Errors.
var ()

// Pool runs calls in worker processes. It is safe for concurrent use.
type Pool struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	idle     []*proc
	busy     map[*proc]struct{}
	others   map[*proc]struct{} // warming or compiling
	spawning map[*context.CancelFunc]context.CancelFunc
	count    int // workers alive or starting
	closing  bool
	waiters  *list.List // of chan struct{}: callers waiting for a worker
	finished chan struct{}

	starting    sync.WaitGroup // prestarts in flight
	reaped      sync.WaitGroup // worker processes started and not yet reaped
	inflight    atomic.Int64   // calls sent to workers and not yet answered
	fpOnce      sync.Once
	confOnce    sync.Once
	fingerprint string

	// cannotRestore: putting a worker back to normal priority failed once
	// (no CAP_SYS_NICE, RLIMIT_NICE too low), so replacements start at
	// normal priority: one at SCHED_IDLE would be replaced again by the
	// next call of another tool, and so on (priority.go).
	cannotRestore atomic.Bool

	reg      registry
	infos    sandbox.InfoCache
	mem      *memArtifacts
	diskOnce sync.Once
	disk     *compcache.Cache // nil: no disk cache

	// Idle workers started for a set of preopened directories, kept for
	// the next call with the very same directories (preopen.go).
	preMu   sync.Mutex
	preIdle []*preopenWorker
}

// New creates a pool. Workers start on first use.
func New(opts *Options) (*Pool, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(o.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("worker pool: find this program to re-execute: %w", err)
		}
		o.Command = []string{exe}
	}
	if o.Size <= 0 {
		o.Size = 4
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = sandbox.DefaultMaxLogBytes
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = sandbox.DefaultMaxOutputBytes
	}
	if o.Grace <= 0 {
		o.Grace = defaultGrace
	}
	if o.Allowance == 0 {
		o.Allowance = DefaultAllowance
	}
	if o.CompileCPU == 0 {
		o.CompileCPU = 300
	}
	if o.CompileMemory == 0 {
		o.CompileMemory = 4 << 30
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Second
	}
	if o.MaxCacheBytes <= 0 {
		o.MaxCacheBytes = sandbox.DefaultMaxCacheBytes
	}
	p := &Pool{opts: o, log: o.Logger, busy: map[*proc]struct{}{}, others: map[*proc]struct{}{},
		spawning: map[*context.CancelFunc]context.CancelFunc{}, waiters: list.New(), mem: newMemArtifacts(int(o.MaxCacheBytes))}
	p.reg.pool = p
	return p, nil
}

var _ sandbox.Runner = (*Pool)(nil)

// acquire takes an idle worker, starts one if fewer than Size exist, or
// waits for one.
func (p *Pool) acquire(ctx context.Context) (*proc, error) {
	return p.acquireFor(ctx, "", false)
}

// acquireFor is acquire for a call of compiled code art: an idle worker
// that holds art comes first (the most recently used), so that a call does
// not take the worker another tool's code is warm in. A low-priority call
// (a tool in trouble, priority.go) takes no worker warm with other code
// while it may start one of its own, so a crash storm burns none of other
// tools' warm workers. That start runs at normal priority (the call's
// guest code then runs at SCHED_IDLE: acquirePriority): started at
// SCHED_IDLE on a machine busy with other work, a worker could miss its
// start-up deadline and fail the call with "did not start" instead of
// running it slowly; a tool in trouble runs one call at a time
// (admission.go), so this is one start at a time.
func (p *Pool) acquireFor(ctx context.Context, art string, low bool) (*proc, error) {
	for {
		p.mu.Lock()
		if p.closing {
			p.mu.Unlock()
			return nil, api.ErrClosed
		}
		i := p.idleHoldingLocked(art)
		if i < 0 && len(p.idle) > 0 && !(low && p.count < p.opts.Size) {
			i = len(p.idle) - 1
		}
		if i >= 0 {
			w := p.idle[i]
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			if w.gone() || w.pending() {
				// It died idle (killed from outside), or it misbehaved
				// between calls (sent bytes while nobody read it: see
				// proc.read): not this call's fault; take another.
				w.kill(killedShutdown)
				p.count--
				p.mu.Unlock()
				continue
			}
			p.busy[w] = struct{}{}
			p.mu.Unlock()
			return w, nil
		}
		if p.count < p.opts.Size {
			p.count++
			p.starting.Add(1)
			p.mu.Unlock()
			w, err := p.spawnTrackedWith(ctx, nil, nil, false)
			p.starting.Done()
			p.mu.Lock()
			if err != nil {
				p.count--
				p.wakeLocked()
				p.mu.Unlock()
				return nil, err
			}
			p.setFingerprint(w.fingerprint)
			p.noteConfinement(w)
			if p.closing {
				p.count--
				p.mu.Unlock()
				w.kill(killedShutdown)
				return nil, api.ErrClosed
			}
			p.busy[w] = struct{}{}
			p.mu.Unlock()
			return w, nil
		}
		ch := make(chan struct{})
		el := p.waiters.PushBack(ch)
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			select {
			case <-ch:
				// Woken just as it gave up: pass the turn on.
				p.wakeLocked()
			default:
				p.waiters.Remove(el)
			}
			p.mu.Unlock()
			return nil, ctx.Err()
		}
	}
}

// idleHoldingLocked is the index of the most recently idle worker that
// holds compiled code art, or -1.
func (p *Pool) idleHoldingLocked(art string) int {
	if art == "" {
		return -1
	}
	for i := len(p.idle) - 1; i >= 0; i-- {
		if slices.Contains(p.idle[i].loaded, art) {
			return i
		}
	}
	return -1
}

func (p *Pool) wakeLocked() {
	if el := p.waiters.Front(); el != nil {
		p.waiters.Remove(el)
		close(el.Value.(chan struct{}))
	}
}

// release returns a healthy worker to the pool, or ends a broken one.
func (p *Pool) release(w *proc, healthy bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.busy, w)
	if !healthy || p.closing {
		w.kill(killedShutdown)
		p.count--
		if p.closing && len(p.busy) == 0 && p.finished != nil {
			close(p.finished)
			p.finished = nil
		}
		if !p.closing && p.waiters.Len() == 0 {
			// Replace it now, so the next call does not pay for the start.
			p.count++
			p.starting.Add(1)
			go p.prestart(w.loaded, w.idlePriority && !p.cannotRestore.Load())
		}
	} else if w.gone() || len(w.frames) > 0 || w.rd.Buffered() > 0 {
		// Dead, or it sent something after its answer that is already
		// read: not to be trusted with another call. Bytes still in the
		// socket are not looked for here: the call that takes this worker
		// next looks (acquireFor: pending), and sees bytes sent after the
		// answer as well as any sent later while idle; a look here too was
		// a second system call on every call's path.
		w.kill(killedProtocol)
		p.count--
	} else {
		p.idle = append(p.idle, w)
	}
	p.wakeLocked()
}

// prestart starts a worker for a slot already counted and adds it to the
// idle list. It gives the new worker the compiled code the one it replaces
// held most recently, and warms it with a describe() call: a fresh worker's
// first instantiation faults its code in (tens of milliseconds for a Go or
// JS tool), which would otherwise land on the next call and its deadline.
//
// The replacement of a worker that died at SCHED_IDLE (a tool in trouble)
// starts and warms at SCHED_IDLE too, until a call takes it (run).
func (p *Pool) prestart(loaded []string, idle bool) {
	defer p.starting.Done()
	w, err := p.spawnTrackedWith(context.Background(), nil, nil, idle)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		// Shutdown kills a warming worker like a busy one.
		p.track(w, true)
		defer p.track(w, false)
		for _, art := range loaded[max(0, len(loaded)-2):] {
			var ok bool
			_, werr := p.runOn(ctx, w, art, "describe", sandbox.Call{Limits: warmLimits}, time.Now(), &ok)
			if werr != nil || !ok {
				break
			}
		}
		cancel()
		select {
		case <-w.dead:
			// Warming killed it (a tool whose describe misbehaves): the
			// next call starts a fresh one.
			err = errors.New("worker died while warming")
		default:
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if w != nil {
			w.kill(killedShutdown)
		}
		p.count--
		p.log.Warn("cannot start a worker", "error", err)
		p.wakeLocked()
		return
	}
	if p.closing {
		p.count--
		w.kill(killedShutdown)
		return
	}
	p.idle = append(p.idle, w)
	p.wakeLocked()
}

func (p *Pool) setFingerprint(fp string) {
	p.fpOnce.Do(func() { p.fingerprint = fp })
}

// noteConfinement logs, once, how workers are confined, and warns when the
// kernel offers no Landlock (seccomp and rlimits still apply).
func (p *Pool) noteConfinement(w *proc) {
	p.confOnce.Do(func() {
		if strings.HasPrefix(w.confinement, "landlock ABI") {
			p.log.Debug("worker processes confined", "how", w.confinement+", seccomp, rlimits, no_new_privs")
			return
		}
		p.log.Warn("worker processes run without Landlock: they can open files this user can (seccomp still denies sockets and programs)", "why", w.confinement)
	})
}

// spawnTracked starts a worker that Shutdown kills if it happens meanwhile.
func (p *Pool) spawnTracked(ctx context.Context) (*proc, error) {
	return p.spawnTrackedWith(ctx, nil, nil, false)
}

// spawnTrackedWith is spawnTracked for a worker that inherits files (from
// fd 4) and has env added to its environment, started at SCHED_IDLE if
// idle.
func (p *Pool) spawnTrackedWith(ctx context.Context, files []*os.File, env []string, idle bool) (*proc, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return nil, api.ErrClosed
	}
	p.spawning[&cancel] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.spawning, &cancel)
		p.mu.Unlock()
	}()
	w, err := spawnWith(ctx, p.opts.Command, p.opts.StartTimeout, files, env, idle)
	if w != nil {
		// Shutdown waits for this: a killed worker left unreaped stays a
		// zombie until init adopts it (~1.5 s after maiden exits).
		p.reaped.Add(1)
		go func() { <-w.exited; p.reaped.Done() }()
	}
	if err != nil && ctx.Err() != nil && p.isClosing() {
		return nil, api.ErrClosed
	}
	return w, err
}

// track adds (or removes) a worker that is neither idle nor busy (warming,
// compiling) to the set Shutdown kills.
func (p *Pool) track(w *proc, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.others[w] = struct{}{}
		if p.closing {
			w.kill(killedShutdown)
		}
	} else {
		delete(p.others, w)
	}
}

func (p *Pool) isClosing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closing
}

// Shutdown stops new calls, interrupts the running ones (their workers are
// killed: the calls end as interrupted), kills workers starting, warming
// or compiling, and waits for the calls to return, or for ctx.
func (p *Pool) Shutdown(ctx context.Context) error {
	// The compiled code held in memfds; a load still under way holds a
	// duplicate of its own.
	defer p.mem.clear()
	p.mu.Lock()
	p.closing = true
	for _, cancel := range p.spawning {
		cancel()
	}
	for w := range p.others {
		w.kill(killedShutdown)
	}
	idle := p.idle
	p.idle = nil
	p.count -= len(idle)
	for w := range p.busy {
		w.kill(killedShutdown)
	}
	var wait chan struct{}
	if len(p.busy) > 0 {
		if p.finished == nil {
			p.finished = make(chan struct{})
		}
		wait = p.finished
	}
	for p.waiters.Len() > 0 {
		p.wakeLocked()
	}
	p.mu.Unlock()
	for _, w := range idle {
		w.kill(killedShutdown)
	}
	p.dropIdlePreopenWorkers()
	started := make(chan struct{})
	go func() { p.starting.Wait(); close(started) }()
	for _, ch := range []chan struct{}{wait, started} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("worker pool shutdown: %w", ctx.Err())
		}
	}
	// Every worker killed above is reaped before Shutdown returns, so a
	// stopping maiden leaves no zombie behind it. Bounded: a worker that a
	// bug left unkilled must not hold the host's Close forever.
	reaped := make(chan struct{})
	go func() { p.reaped.Wait(); close(reaped) }()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-reaped:
	case <-ctx.Done():
		return fmt.Errorf("worker pool shutdown: %w", ctx.Err())
	case <-t.C:
		p.log.Warn("worker pool shutdown: workers not reaped within 5s")
	}
	return nil
}

// Workers reports how many worker processes are alive, for tests and
// diagnostics.
func (p *Pool) Workers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// memArtifacts keeps compiled code in memory, least recently used evicted
// past max bytes: each artifact in a sealed memfd (codefd.go), or as bytes
// where no memfd can be made.
type memArtifacts struct {
	mu    sync.Mutex
	max   int
	size  int
	order *list.List // of *memArtifact, most recent at front
	m     map[string]*list.Element
	// minFile is the smallest artifact kept in a memfd; smaller ones stay
	// bytes (a WAT tool's few KB load as fast in the frame, and a memfd
	// is a descriptor: a cache of a gigabyte of small artifacts must not
	// hold hundreds of thousands). At most max/minFile memfds, then.
	minFile int
}

// minCodeFile is memArtifacts.minFile's default.
const minCodeFile = 1 << 20

type memArtifact struct {
	key  string
	file *os.File // nil: code holds the bytes
	code []byte
	size int
}

func newMemArtifacts(max int) *memArtifacts {
	return &memArtifacts{max: max, order: list.New(), m: map[string]*list.Element{}, minFile: minCodeFile}
}

// Get returns key's code; the caller closes it. A memfd comes as a
// duplicate made under the lock, so an eviction meanwhile closes only the
// cache's own descriptor, never one in use.
func (a *memArtifacts) Get(key string) (loadable, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	el, ok := a.m[key]
	if !ok {
		return loadable{}, false
	}
	a.order.MoveToFront(el)
	v := el.Value.(*memArtifact)
	if v.file == nil {
		return loadable{code: v.code, size: v.size}, true
	}
	fd, err := unix.FcntlInt(v.file.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return loadable{}, false
	}
	return loadable{file: os.NewFile(uintptr(fd), v.file.Name()), size: v.size}, true
}

// Put keeps code under key, in a sealed memfd if it is large enough and
// one can be made.
func (a *memArtifacts) Put(key string, code []byte) error {
	if len(code) >= a.minSize() {
		if f, n, err := codeFileOf(code); err == nil {
			a.put(&memArtifact{key: key, file: f, size: int(n)})
			return nil
		}
	}
	a.put(&memArtifact{key: key, code: code, size: len(code)})
	return nil
}

func (a *memArtifacts) minSize() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.minFile
}

func (a *memArtifacts) put(v *memArtifact) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if el, ok := a.m[v.key]; ok {
		a.order.MoveToFront(el)
		if v.file != nil {
			v.file.Close()
		}
		return
	}
	a.m[v.key] = a.order.PushFront(v)
	a.size += v.size
	for a.size > a.max && a.order.Len() > 1 {
		el := a.order.Back()
		old := el.Value.(*memArtifact)
		a.order.Remove(el)
		delete(a.m, old.key)
		a.size -= old.size
		if old.file != nil {
			old.file.Close()
		}
	}
}

// clear forgets every artifact (Shutdown).
func (a *memArtifacts) clear() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, el := range a.m {
		if v := el.Value.(*memArtifact); v.file != nil {
			v.file.Close()
		}
	}
	a.order.Init()
	a.m = map[string]*list.Element{}
	a.size = 0
}
