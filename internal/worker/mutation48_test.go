package worker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/wasmscan"
	"github.com/maiden-run/maiden/internal/wasmscan/scantest"
	"golang.org/x/sys/unix"
)

// TestMutation48ReplacedFileReloaded: a tool file replaced by another (a new
// inode and size under the same path) is loaded again: the registry never
// serves the version it loaded from the old bytes for the new ones.
func TestMutation48ReplacedFileReloaded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPool(t, &Options{Size: 1})
	dir := t.TempDir()
	path := filepath.Join(dir, "tool.wasm")
	put := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(testkit.Component(t, name))
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	echo := put("echo")
	tl, err := p.Open(ctx, path, lim)
	if err != nil || tl.Digest != echo {
		t.Fatalf("Open(echo): %v, %v", tl, err)
	}
	trap := put("trap")
	tl, err = p.Open(ctx, path, lim)
	if err != nil {
		t.Fatal(err)
	}
	if tl.Digest != trap {
		t.Fatalf("Open after the file was replaced: digest %s (the old file's: %t); want the new file's %s", tl.Digest, tl.Digest == echo, trap)
	}
}

// TestMutation48InstanceStateCheckedOnACacheHit: a component whose bytes
// create more per-instance state than maiden allows is refused from its bytes
// (wasmscan.ErrLimit) even when compiled code for its digest is already
// stored: no worker is asked to load or describe it.
func TestMutation48InstanceStateCheckedOnACacheHit(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1})
	attack := scantest.Component(scantest.Module(scantest.ModuleSpec{Globals: 1_000_000, Memories: 1}), 100)
	path := filepath.Join(t.TempDir(), "globals.wasm")
	if err := os.WriteFile(path, attack, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(attack)
	// Code stored under its digest (as by an earlier maiden, or another
	// path with the same bytes): a cache hit skips the compile worker.
	p.storeArtifact(hex.EncodeToString(sum[:]), []byte("not compiled code"))
	_, err := p.Open(context.Background(), path, lim)
	if !errors.Is(err, sandbox.ErrInvalidTool) || !errors.Is(err, wasmscan.ErrLimit) {
		t.Fatalf("Open of a component over the instance-state limits, its code cached: %v; want ErrInvalidTool wrapping wasmscan.ErrLimit", err)
	}
}

// TestMutation48InvalidFileRefusedAndRemembered: a file that is no component
// and was last written long ago is refused as invalid at once (not waited
// for as a file being written), and the refusal is kept for its version: the
// next call is refused from the registry, without reading the file again.
func TestMutation48InvalidFileRefusedAndRemembered(t *testing.T) {
	t.Parallel()
	p := newPool(t, &Options{Size: 1})
	path := filepath.Join(t.TempDir(), "notes.wasm")
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho not wasm\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := p.Open(context.Background(), path, lim)
	if !errors.Is(err, sandbox.ErrInvalidTool) || !strings.Contains(err.Error(), "is not a WebAssembly component") {
		t.Fatalf("Open of a text file written an hour ago: %v; want ErrInvalidTool, not a WebAssembly component", err)
	}
	if d := time.Since(start); d > testkit.Slack(t, time.Second) {
		t.Errorf("Open of a text file written an hour ago took %v: it was waited for as a file being written (settle is %v)", d, settle)
	}
	p.reg.mu.Lock()
	v := p.reg.m[path]
	p.reg.mu.Unlock()
	if v == nil || !errors.Is(v.err, sandbox.ErrInvalidTool) {
		t.Fatalf("after the refusal the registry holds %+v for the file; want its version kept with the ErrInvalidTool refusal", v)
	}
}

// TestMutation48CloseKeepsDescriptorsOfAUser: Close while a reader or writer
// still holds the conn (asleep on it) leaves both descriptors open until the
// last user returns, so their numbers are never handed to another file under
// that user (whose release would then close the other file); and a closed
// conn is never taken for a clean one between calls (pending).
func TestMutation48CloseKeepsDescriptorsOfAUser(t *testing.T) {
	c, _ := ipcPair(t)
	if !c.acquire() {
		t.Fatal("acquire of an open conn refused")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fd := range []int{c.fd, c.wake} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			t.Errorf("fd %d closed by Close while a user still held the conn (%v); want it open until the user returns", fd, err)
		}
	}
	if !c.pending() {
		t.Error("pending() of a closed conn = false; want true (a killed worker's conn is not to be trusted with a call)")
	}
	c.release()
	assertClosedFDs(t, c)
}

// TestMutation48ChildTakesOnlyItsCallsFrames: a worker's reader gives the
// call in progress only the cancel, fetch reply and reveal reply that name
// its ID: one meant for an earlier call (a fetch's answer, a secret's value)
// never reaches the next call's tool, nor cancels it.
func TestMutation48ChildTakesOnlyItsCallsFrames(t *testing.T) {
	t.Parallel()
	c := &child{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &childRun{id: 2, ctx: ctx, cancel: cancel, replies: make(chan fetchReplyMsg, 1), reveals: make(chan revealReplyMsg, 1)}
	c.run = r
	var frames []byte
	frames = append(frames, cancelMsg{ID: 1}.encode()...)
	frames = append(frames, fetchReplyMsg{ID: 1, Status: 200, Body: []byte("call 1's response")}.encode()...)
	frames = append(frames, revealReplyMsg{ID: 1, OK: true, Value: "call 1's secret"}.encode()...)
	if _, err := c.readUntilRun(bufio.NewReader(bytes.NewReader(frames))); err != io.EOF {
		t.Fatalf("readUntilRun: %v, want io.EOF after the frames", err)
	}
	if err := ctx.Err(); err != nil {
		t.Error("call 2 was cancelled by the cancel of call 1")
	}
	select {
	case m := <-r.replies:
		t.Errorf("call 2 was given call 1's fetch reply %q", m.Body)
	default:
	}
	select {
	case m := <-r.reveals:
		t.Errorf("call 2 was given call 1's reveal reply %q", m.Value)
	default:
	}
}

// TestMutation48WriteToAGoneWorkerFails: a frame written to a worker whose
// end of the socket is closed fails (EPIPE), not reported as sent.
func TestMutation48WriteToAGoneWorkerFails(t *testing.T) {
	t.Parallel()
	c, peer := ipcPairOpen(t)
	defer c.Close()
	if err := unix.Close(peer); err != nil {
		t.Fatal(err)
	}
	n, err := c.Write([]byte("a run frame"))
	if !errors.Is(err, unix.EPIPE) {
		t.Fatalf("Write to a worker whose end is closed: %d, %v; want EPIPE", n, err)
	}
}

// TestMutation48WorkerUnconfinedSaysNothing: a worker whose confinement
// failed (here an unreadable MAIDEN_WORKER_PREOPENS, which the C
// confinement refuses before Go starts) exits with status 3 and the reason
// on stderr, before its hello: it never offers to run guest code
// unconfined.
func TestMutation48WorkerUnconfinedSaysNothing(t *testing.T) {
	t.Parallel()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	parent, workerEnd := os.NewFile(uintptr(fds[0]), "parent"), os.NewFile(uintptr(fds[1]), "worker")
	defer parent.Close()
	cmd := exec.Command(mustExe(t))
	cmd.Env = []string{envWorker + "=1", envPreopens + "=x"}
	cmd.ExtraFiles = []*os.File{workerEnd}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	workerEnd.Close()
	// The worker's first bytes (a hello), or the end of its socket when it
	// exits without a word.
	b := make([]byte, 256)
	n, rerr := parent.Read(b)
	parent.Close()
	werr := cmd.Wait()
	if n > 0 {
		t.Errorf("a worker whose confinement failed sent %d bytes (%q…): it offered to serve calls unconfined", n, b[:min(n, 16)])
	} else if rerr != io.EOF {
		t.Errorf("read of the worker's socket: %v, want EOF", rerr)
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 3 || !strings.Contains(stderr.String(), "confinement failed") {
		t.Errorf("worker exit: %v, stderr %q; want status 3 and \"confinement failed\"", werr, stderr.String())
	}
}

// TestMutation48ChildRefusesASecondRun: a run frame while a call is in
// progress is refused (the worker ends), never made the call in progress in
// place of the first, whose fetch and reveal replies it would then take.
func TestMutation48ChildRefusesASecondRun(t *testing.T) {
	t.Parallel()
	c := &child{}
	first, err := c.start(runMsg{ID: 1, Export: "execute"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.cancel()
	if second, err := c.start(runMsg{ID: 2, Export: "execute"}); err == nil || !strings.Contains(err.Error(), "run while a call is in progress") {
		t.Fatalf("a second run during call 1: %+v, %v; want refused", second, err)
	}
	if c.run != first {
		t.Fatalf("the call in progress is %d; want 1", c.run.id)
	}
}

// TestMutation48CancelSignalBeforeTheCallIsKept: the parent's wake-up
// signal that reaches a worker before the call is armed (its cancel frame
// behind the run frame being read) is kept, so the call starts the reader
// that finds the cancel as it is armed; lost, the guest would run on
// uninterrupted to the parent's kill.
func TestMutation48CancelSignalBeforeTheCallIsKept(t *testing.T) {
	c := &child{}
	c.reader.Store(readerIdle)
	c.watchCancelSignal()
	if err := unix.Kill(os.Getpid(), wakeSignal); err != nil {
		t.Fatal(err)
	}
	bound := time.Now().Add(10 * time.Second)
	for !c.cancelSignal.Load() && time.Now().Before(bound) {
		time.Sleep(time.Millisecond) // polling a flag the signal goroutine sets
	}
	if !c.armReader() {
		t.Fatal("a call armed after the parent's signal started no reader: the signal was lost")
	}
}

// TestMutation48CompileDeathNotTheComponentsFault: a compile worker killed
// because its caller gave up, or killed from outside maiden (an operator, the
// OOM killer), does not make the component invalid (ErrInvalidTool is
// remembered until the file changes): an agent that cancels a first call
// cannot break the tool for everyone.
func TestMutation48CompileDeathNotTheComponentsFault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPool(t, &Options{Size: 1})
	const path = "/tools/tool.wasm"

	w, err := p.spawnTracked(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	w.kill(killedCancel)
	<-w.exited
	if err := p.compileDeath(gone, w, path); !errors.Is(err, context.Canceled) || errors.Is(err, sandbox.ErrInvalidTool) {
		t.Errorf("compile worker killed as its caller gave up: %v; want context.Canceled, not ErrInvalidTool", err)
	}

	w, err = p.spawnTracked(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(w.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-w.exited
	if err := p.compileDeath(ctx, w, path); errors.Is(err, sandbox.ErrInvalidTool) || !strings.Contains(err.Error(), "killed from outside maiden") {
		t.Errorf("compile worker SIGKILLed from outside: %v; want \"killed from outside maiden\", not ErrInvalidTool", err)
	}
	w.kill(killedShutdown)
}
