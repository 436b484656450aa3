package confine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// self is the binary the trampoline runs: this program, as the kernel
// knows it (not argv[0], not $PATH).
var self = sync.OnceValues(func() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("confine: finding this program's executable: %w", err)
	}
	return p, nil
})

// Run runs s.Path confined (see the package documentation) and returns how
// it ended. An error means it could not be run as asked (a bad spec,
// confinement this kernel cannot enforce without Spec.Unconfined, a failure
// to start or to confine); a program that ran and failed is a Result with
// its exit code.
func Run(ctx context.Context, s Spec) (Result, error) {
	start := time.Now()
	ws, unconfined, err := prepare(s)
	if err != nil {
		return Result{}, err
	}
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	filter, err := seccompFilter(ws.ProxyPort != 0)
	if err != nil {
		return Result{}, fmt.Errorf("confine: %w", err)
	}
	ruleset := -1
	if ws.Landlock > 0 {
		if ruleset, err = buildRuleset(ws, ws.Landlock); err != nil {
			return Result{}, fmt.Errorf("confine: %s: %w", s.Path, err)
		}
		defer unix.Close(ruleset)
	}
	netns, err := runNetns(ws)
	if err != nil {
		return Result{}, fmt.Errorf("confine: %s: %w", s.Path, err)
	}
	nsfd, userfd := -1, -1
	if netns != nil {
		// After the program: its relayed connections end with it.
		defer netns.Close()
		nsfd, userfd = netns.fd(), netns.userFd()
	}
	var closers []*os.File
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err != nil {
			return nil, nil, fmt.Errorf("confine: pipe: %w", err)
		}
		closers = append(closers, r, w)
		return r, w, nil
	}
	stdinR, stdinW, err := pipe()
	if err != nil {
		return Result{}, err
	}
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		return Result{}, err
	}
	stderrR, stderrW, err := pipe()
	if err != nil {
		return Result{}, err
	}
	statusR, statusW, err := pipe()
	if err != nil {
		return Result{}, err
	}
	pid, err := spawn(ws, s.Dir, ruleset, nsfd, userfd, filter, [4]*os.File{stdinR, stdoutW, stderrW, statusW})
	if err != nil {
		return Result{}, fmt.Errorf("confine: %s: %w", s.Path, err)
	}
	// The child's ends, and the ruleset, are its own now.
	for _, f := range []*os.File{stdinR, stdoutW, stderrW, statusW} {
		f.Close()
	}
	killGroup := func() { _ = unix.Kill(-pid, unix.SIGKILL) }
	var timedOut atomic.Bool
	stop := context.AfterFunc(ctx, func() {
		timedOut.Store(true)
		killGroup()
	})
	defer stop()
	// vfork returned: the program is executing, or the child failed and
	// said why.
	msg, _ := io.ReadAll(io.LimitReader(statusR, 256))

	max := s.MaxOutput
	if max <= 0 {
		max = DefaultMaxOutput
	}
	stdout, stderr := &capped{max: max}, &capped{max: max}
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); _, _ = io.Copy(stdout, stdoutR) }()
	go func() { defer copies.Done(); _, _ = io.Copy(stderr, stderrR) }()
	go func() {
		if len(s.Stdin) > 0 {
			_, _ = stdinW.Write(s.Stdin)
		}
		stdinW.Close()
	}()

	// Wait for the program without reaping it (its PID, and so its process
	// group's ID, stays taken), kill whatever is left of its group, then
	// reap it and collect the output.
	var info unix.Siginfo
	for {
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			break
		}
	}
	killGroup()
	var ws4 unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws4, 0, nil); err != unix.EINTR {
			break
		}
	}
	stop()
	// Every process of the group is dead, so the pipes close; a process
	// that left the group (it cannot: seccomp) would be cut off here.
	done := make(chan struct{})
	go func() { copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		stdoutR.Close()
		stderrR.Close()
		<-done
	}
	res := Result{
		Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(),
		StdoutDropped: stdout.dropped, StderrDropped: stderr.dropped,
		Unconfined: unconfined, Landlock: ws.Landlock, NetNS: netns != nil, Duration: time.Since(start),
		TimedOut: timedOut.Load(),
	}
	if ws4.Signaled() {
		res.ExitCode, res.Signal = -1, unix.SignalName(ws4.Signal())
	} else {
		res.ExitCode = ws4.ExitStatus()
	}
	if len(msg) > 0 {
		return res, childError(s.Path, string(msg))
	}
	return res, nil
}

// childError is the error of the child's report "step: errno" about
// path, wrapping the errno (errors.Is(err, unix.ETXTBSY), say).
func childError(path, msg string) error {
	step, num, ok := strings.Cut(msg, ": ")
	if n, err := strconv.Atoi(num); ok && err == nil {
		return fmt.Errorf("confine: %s: %s: %w", path, step, unix.Errno(n))
	}
	return fmt.Errorf("confine: %s: %s", path, msg)
}

// prepare checks s and decides the confinement this kernel gives it.
func prepare(s Spec) (*wireSpec, bool, error) {
	if !filepath.IsAbs(s.Path) {
		return nil, false, fmt.Errorf("confine: executable %q is not an absolute path", s.Path)
	}
	for _, p := range slices.Concat(s.ReadOnly, s.Writable, s.SystemReadOnly) {
		if !filepath.IsAbs(p) {
			return nil, false, fmt.Errorf("confine: path %q is not absolute", p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, false, fmt.Errorf("confine: path %s: %w", p, err)
		}
	}
	if s.ProxyPort < 0 || s.ProxyPort > 65535 {
		return nil, false, fmt.Errorf("confine: proxy port %d is out of range", s.ProxyPort)
	}
	ws := &wireSpec{
		Path: s.Path, Argv: append([]string{s.Path}, s.Args...), Env: s.Env,
		ReadOnly: s.ReadOnly, Writable: s.Writable, SystemReadOnly: s.SystemReadOnly, ProxyPort: s.ProxyPort,
		Limits: s.Limits.withDefaults(),
	}
	abi, why := landlockABI()
	unconfined := false
	switch {
	case abi < 1:
		if !s.Unconfined {
			return nil, false, fmt.Errorf("confine: %w: Landlock is not available on this kernel (%v); set unconfined = true to run without it", ErrNotEnforced, why)
		}
		unconfined = true
	case s.ProxyPort != 0 && abi < 4:
		if !s.Unconfined {
			return nil, false, fmt.Errorf("confine: %w: Landlock network rules need ABI 4; this kernel has %d", ErrNotEnforced, abi)
		}
		// The filesystem is still confined; TCP is not.
		unconfined, ws.Landlock = true, abi
	default:
		ws.Landlock = abi
	}
	return ws, unconfined, nil
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	max     int64
	buf     bytes.Buffer
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - int64(c.buf.Len())
	if room >= int64(len(p)) {
		return c.buf.Write(p)
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	c.dropped += int64(len(p)) - max(room, 0)
	return len(p), nil
}
