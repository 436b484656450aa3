package worker

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"golang.org/x/sys/unix"
)

// A call with WASI preopened directories runs in a worker of its own,
// started for those directories: a worker's Landlock domain is fixed before
// its Go runtime starts and can only narrow, so the directories must be
// known at start. Such a worker serves only calls with the very same
// directories (paths, access, and device and inode); a few are kept idle. The parent opens each directory
// (sandbox.OpenPreopens: checked, no symlink followed) and the worker
// inherits the descriptors from preopenFD0 on; the environment says, per
// descriptor, whether it is writable (envPreopens, read by confine_linux.c,
// which grants exactly that beneath each) and its paths.
const (
	envPreopens     = "MAIDEN_WORKER_PREOPENS"      // one 'r' or 'w' per directory
	envPreopenHost  = "MAIDEN_WORKER_PREOPEN_HOST_" // + index: the host path (for messages)
	envPreopenGuest = "MAIDEN_WORKER_PREOPEN_GUEST_"
	preopenFD0      = 4 // after the IPC socket (confine_linux.c's PREOPEN_FD0)
)

// preopenSpawn is what a one-call worker inherits.
func preopenSpawn(dirs []sandbox.OpenedPreopen) (files []*os.File, env []string) {
	modes := make([]byte, len(dirs))
	for i, d := range dirs {
		modes[i] = 'r'
		if d.Write {
			modes[i] = 'w'
		}
		files = append(files, d.Dir)
		env = append(env, envPreopenHost+strconv.Itoa(i)+"="+d.HostPath, envPreopenGuest+strconv.Itoa(i)+"="+d.GuestPath)
	}
	return files, append(env, envPreopens+"="+string(modes))
}

// childPreopens reads the directories a one-call worker inherited (none in
// an ordinary worker).
func childPreopens() ([]sandbox.OpenedPreopen, error) {
	modes, ok := os.LookupEnv(envPreopens)
	if !ok {
		return nil, nil
	}
	if len(modes) > sandbox.MaxPreopens {
		return nil, fmt.Errorf("%s names %d directories, over %d", envPreopens, len(modes), sandbox.MaxPreopens)
	}
	dirs := make([]sandbox.OpenedPreopen, len(modes))
	for i := range dirs {
		host, guest := os.Getenv(envPreopenHost+strconv.Itoa(i)), os.Getenv(envPreopenGuest+strconv.Itoa(i))
		dirs[i] = sandbox.OpenedPreopen{
			Preopen: sandbox.Preopen{HostPath: host, GuestPath: guest, Write: modes[i] == 'w'},
			Dir:     os.NewFile(uintptr(preopenFD0+i), host),
		}
	}
	return dirs, nil
}

// maxIdlePreopenWorkers bounds the one-call workers kept for reuse.
const maxIdlePreopenWorkers = 2

// preopenWorker is a worker started with a set of directories: their
// paths and access (key) and their identity (device and inode) as the
// worker holds them.
type preopenWorker struct {
	w   *proc
	key string
	ids []dirID
}

type dirID struct{ dev, ino uint64 }

// preopenKey and the identities of dirs, as they are now.
func preopenIdentity(dirs []sandbox.OpenedPreopen) (string, []dirID, error) {
	var key strings.Builder
	ids := make([]dirID, len(dirs))
	for i, d := range dirs {
		var st unix.Stat_t
		if err := unix.Fstat(int(d.Dir.Fd()), &st); err != nil {
			return "", nil, &sandbox.PreopenError{Path: d.HostPath, Reason: "cannot be examined", Err: err}
		}
		ids[i] = dirID{dev: uint64(st.Dev), ino: st.Ino}
		fmt.Fprintf(&key, "%q %q %v\n", d.HostPath, d.GuestPath, d.Write)
	}
	return key.String(), ids, nil
}

// runPreopened runs one export in a worker whose Landlock domain holds
// exactly the call's directories: an idle one started for the same paths
// and access whose directories are still the very ones the call opened
// (same device and inode: a directory replaced since is another), else a
// new one. A worker that served the call well waits for the next such call.
func (p *Pool) runPreopened(ctx context.Context, art, export string, c sandbox.Call) (sandbox.Outcome, error) {
	start := time.Now()
	dirs := c.Opened
	if len(dirs) == 0 {
		var err error
		if dirs, err = sandbox.OpenPreopens(c.Preopens); err != nil {
			return sandbox.Outcome{Duration: time.Since(start)}, err
		}
		defer sandbox.ClosePreopens(dirs)
	} else {
		given := make([]sandbox.Preopen, len(dirs))
		for i, d := range dirs {
			given[i] = d.Preopen
		}
		if err := sandbox.ValidatePreopens(given); err != nil {
			return sandbox.Outcome{Duration: time.Since(start)}, err
		}
	}
	key, ids, err := preopenIdentity(dirs)
	if err != nil {
		return sandbox.Outcome{Duration: time.Since(start)}, err
	}
	pw := p.takePreopenWorker(key, ids)
	if pw == nil {
		files, env := preopenSpawn(dirs)
		w, err := p.spawnTrackedWith(ctx, files, env, false)
		if err != nil {
			return sandbox.Outcome{Duration: time.Since(start)}, fmt.Errorf("start a worker for a call with preopened directories: %w", err)
		}
		p.track(w, true) // Shutdown kills it, running or idle
		pw = &preopenWorker{w: w, key: key, ids: ids}
	}
	var healthy bool
	out, err := p.runOn(ctx, pw.w, art, export, c, start, &healthy)
	p.releasePreopenWorker(pw, healthy)
	return out, err
}

// takePreopenWorker removes and returns an idle worker for exactly these
// directories, or nil.
func (p *Pool) takePreopenWorker(key string, ids []dirID) *preopenWorker {
	p.preMu.Lock()
	defer p.preMu.Unlock()
	for i, pw := range p.preIdle {
		if pw.key != key || !slices.Equal(pw.ids, ids) {
			continue
		}
		p.preIdle = slices.Delete(p.preIdle, i, i+1)
		if pw.w.gone() || pw.w.pending() {
			// Dead, or it spoke while idle (bytes in its socket, a
			// frame in its mailbox: see Pool.acquireFor): not to be
			// trusted with another call.
			p.retirePreopenWorker(pw)
			return nil
		}
		return pw
	}
	return nil
}

// releasePreopenWorker keeps a healthy worker for reuse (the oldest idle
// one makes room) or ends it, as Pool.release does: one that sent anything
// after its answer is not reused either.
func (p *Pool) releasePreopenWorker(pw *preopenWorker, healthy bool) {
	if !healthy || pw.w.gone() || p.isClosing() {
		p.retirePreopenWorker(pw)
		return
	}
	if len(pw.w.frames) > 0 || pw.w.rd.Buffered() > 0 {
		pw.w.kill(killedProtocol)
		p.retirePreopenWorker(pw)
		return
	}
	p.preMu.Lock()
	p.preIdle = append(p.preIdle, pw)
	var evicted []*preopenWorker
	if n := len(p.preIdle) - maxIdlePreopenWorkers; n > 0 {
		evicted = slices.Clone(p.preIdle[:n])
		p.preIdle = slices.Delete(p.preIdle, 0, n)
	}
	p.preMu.Unlock()
	for _, e := range evicted {
		p.retirePreopenWorker(e)
	}
	if p.isClosing() {
		// Shutdown began meanwhile and may have missed it.
		p.dropIdlePreopenWorkers()
	}
}

func (p *Pool) retirePreopenWorker(pw *preopenWorker) {
	pw.w.kill(killedShutdown)
	p.track(pw.w, false)
}

// dropIdlePreopenWorkers ends every idle one-call worker.
func (p *Pool) dropIdlePreopenWorkers() {
	p.preMu.Lock()
	idle := p.preIdle
	p.preIdle = nil
	p.preMu.Unlock()
	for _, pw := range idle {
		p.retirePreopenWorker(pw)
	}
}
