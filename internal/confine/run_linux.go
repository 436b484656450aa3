package confine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
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
	exe, err := self()
	if err != nil {
		return Result{}, err
	}
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	var ruleset *os.File
	if ws.Landlock > 0 {
		fd, err := buildRuleset(ws, ws.Landlock)
		if err != nil {
			return Result{}, fmt.Errorf("confine: %s: %w", s.Path, err)
		}
		ruleset = os.NewFile(uintptr(fd), "landlock-ruleset")
		defer ruleset.Close()
	}
	config, err := configBytes(ws)
	if err != nil {
		return Result{}, err
	}
	configR, configW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("confine: config pipe: %w", err)
	}
	defer configW.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		configR.Close()
		return Result{}, fmt.Errorf("confine: status pipe: %w", err)
	}
	defer statusR.Close()
	marker := envMarker + "=N"
	if ruleset != nil {
		marker = envMarker + "=L"
	}

	max := s.MaxOutput
	if max <= 0 {
		max = DefaultMaxOutput
	}
	stdout, stderr := &capped{max: max}, &capped{max: max}
	cmd := &exec.Cmd{
		Path:       exe,
		Args:       append([]string{"maiden-confine"}, ws.Argv...),
		Env:        append(slices.Clip(ws.Env), marker),
		Dir:        s.Dir,
		Stdout:     stdout,
		Stderr:     stderr,
		ExtraFiles: []*os.File{ruleset, configR, statusW},
		// A new process group, killed whole at the deadline; SIGKILL if
		// this process dies first (it survives the target's execve).
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
		WaitDelay:   time.Second,
	}
	if s.Stdin != nil {
		cmd.Stdin = bytes.NewReader(s.Stdin)
	}
	err = cmd.Start()
	configR.Close()
	statusW.Close()
	if ruleset != nil {
		ruleset.Close()
	}
	if err != nil {
		return Result{}, fmt.Errorf("confine: starting the trampoline %s: %w", exe, err)
	}
	pid := cmd.Process.Pid
	killGroup := func() { _ = unix.Kill(-pid, unix.SIGKILL) }
	var timedOut bool
	var mu sync.Mutex
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		timedOut = true
		mu.Unlock()
		killGroup()
	})
	defer stop()

	_, werr := configW.Write(config)
	configW.Close()
	msg, _ := io.ReadAll(io.LimitReader(statusR, 4096))
	if werr != nil && len(msg) == 0 {
		msg = []byte("sending the config: " + werr.Error())
	}

	// Wait for the process without reaping it (its PID, and so the process
	// group's ID, stays taken), kill whatever is left of its group, then
	// reap it and collect the output.
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	killGroup()
	waitErr := cmd.Wait()
	stop()
	res := Result{
		Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(),
		StdoutDropped: stdout.dropped, StderrDropped: stderr.dropped,
		Unconfined: unconfined, Landlock: ws.Landlock, Duration: time.Since(start),
	}
	mu.Lock()
	res.TimedOut = timedOut
	mu.Unlock()
	st, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case st.Signaled():
		res.ExitCode, res.Signal = -1, unix.SignalName(st.Signal())
	default:
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if len(msg) > 0 && !res.TimedOut {
		return res, fmt.Errorf("confine: %s: %s", s.Path, msg)
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return res, fmt.Errorf("confine: %s: %w", s.Path, waitErr)
	}
	return res, nil
}

// configBytes is what the trampoline reads on fd 4: the rlimits (core,
// data, nproc, fsize, nofile), the number of seccomp instructions and the
// instructions, in the machine's byte order.
func configBytes(ws *wireSpec) ([]byte, error) {
	filter, err := seccompFilter(ws.ProxyPort != 0)
	if err != nil {
		return nil, fmt.Errorf("confine: %w", err)
	}
	l := ws.Limits
	var b []byte
	for _, v := range []uint64{0, l.Memory, l.Processes, l.FileSize, l.Files, uint64(len(filter))} {
		b = binary.NativeEndian.AppendUint64(b, v)
	}
	for _, f := range filter {
		b = binary.NativeEndian.AppendUint16(b, f.Code)
		b = append(b, f.Jt, f.Jf)
		b = binary.NativeEndian.AppendUint32(b, f.K)
	}
	return b, nil
}

// prepare checks s and decides the confinement this kernel gives it.
func prepare(s Spec) (*wireSpec, bool, error) {
	if !filepath.IsAbs(s.Path) {
		return nil, false, fmt.Errorf("confine: executable %q is not an absolute path", s.Path)
	}
	for _, p := range append(append([]string{}, s.ReadOnly...), s.Writable...) {
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
		ReadOnly: s.ReadOnly, Writable: s.Writable, ProxyPort: s.ProxyPort,
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
