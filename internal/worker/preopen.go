package worker

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
)

// A call with WASI preopened directories runs in a worker of its own,
// started for that call and killed after it: a worker's Landlock domain is
// fixed before its Go runtime starts and can only narrow, so the
// directories must be known at start. The parent opens each directory
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

// runPreopened runs one export in a worker started for this call alone,
// with the call's directories.
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
	files, env := preopenSpawn(dirs)
	w, err := p.spawnTrackedWith(ctx, files, env)
	if err != nil {
		return sandbox.Outcome{Duration: time.Since(start)}, fmt.Errorf("start a worker for a call with preopened directories: %w", err)
	}
	p.track(w, true) // Shutdown kills it
	defer p.track(w, false)
	// Its Landlock rules are this call's: no other call may use it.
	defer w.kill(killedShutdown)
	var healthy bool
	return p.runOn(ctx, w, art, export, c, start, &healthy)
}
