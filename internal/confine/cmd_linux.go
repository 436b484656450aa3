package confine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/maiden-run/maiden/internal/childproc"
)

// envMarker in the environment makes the trampoline (tramp_linux.c) act:
// "L" = apply the Landlock ruleset on fd 3, "N" = none; a second letter
// "S" = join the network namespace on fd 6 first, "U" = join the user
// namespace on fd 7 and then that network namespace. The config is on fd 4
// and the status pipe on fd 5.
const envMarker = "MAIDEN_CONFINE_TRAMPOLINE"

// Started says how StartCmd confined a process.
type Started struct {
	// Landlock is the ABI it was confined with (0: none).
	Landlock int
	// Unconfined is set when Landlock was not applied (Spec.Unconfined on a
	// kernel without it).
	Unconfined bool
	// NetNS is set when the process (one with a ProxyPort) runs in a
	// network namespace of its own where only the proxy exists (see
	// Result.NetNS); maiden relays to the proxy until the process exits.
	NetNS bool
}

// StartCmd starts cmd confined as s says, for a process that outlives one
// call (a stdio MCP upstream): the caller keeps cmd's pipes and waits for
// it with cmd.Wait as usual. From s it takes ReadOnly, Writable,
// SystemReadOnly, ProxyPort, Limits and Unconfined; the program,
// arguments, environment (nil means empty, never maiden's) and directory
// are cmd's; cmd.Path must be absolute and cmd.ExtraFiles empty. cmd gets
// its own process group (SysProcAttr.Setpgid) and is killed if maiden
// dies; ending it (the whole group) is the caller's job.
//
// Unlike Run, it starts this program again as a trampoline (exec.Cmd has no
// way to run code between fork and exec): a C constructor that runs before
// the Go runtime applies the confinement and executes cmd.Path. It fits
// mcpimport.Options.Start:
//
//	Start: func(cmd *exec.Cmd) error { _, err := confine.StartCmd(cmd, spec); return err }
func StartCmd(cmd *exec.Cmd, s Spec) (Started, error) {
	if cmd.Process != nil {
		return Started{}, errors.New("confine: StartCmd: the command was already started")
	}
	if len(cmd.ExtraFiles) > 0 {
		return Started{}, errors.New("confine: StartCmd: the command has ExtraFiles")
	}
	if cmd.Err != nil {
		return Started{}, fmt.Errorf("confine: %w", cmd.Err)
	}
	s.Path, s.Args, s.Env = cmd.Path, nil, cmd.Env
	if len(cmd.Args) > 1 {
		s.Args = cmd.Args[1:]
	}
	ws, unconfined, err := prepare(s)
	if err != nil {
		return Started{}, err
	}
	argv0 := cmd.Path
	if len(cmd.Args) > 0 {
		argv0 = cmd.Args[0]
	}
	ws.Argv[0] = argv0
	exe, err := self()
	if err != nil {
		return Started{}, err
	}
	filter, err := seccompFilter(ws.ProxyPort != 0)
	if err != nil {
		return Started{}, fmt.Errorf("confine: %w", err)
	}
	var ruleset *os.File
	if ws.Landlock > 0 {
		fd, err := buildRuleset(ws, ws.Landlock)
		if err != nil {
			return Started{}, fmt.Errorf("confine: %s: %w", s.Path, err)
		}
		ruleset = os.NewFile(uintptr(fd), "landlock-ruleset")
		defer ruleset.Close()
	}
	netns, err := runNetns(ws)
	if err != nil {
		return Started{}, fmt.Errorf("confine: %s: %w", s.Path, err)
	}
	started := false
	defer func() {
		if !started && netns != nil {
			netns.Close()
		}
	}()
	var config []byte
	l := ws.Limits
	for _, v := range []uint64{0, l.Memory, l.Processes, l.FileSize, l.Files, uint64(len(filter))} {
		config = binary.NativeEndian.AppendUint64(config, v)
	}
	for _, f := range filter {
		config = binary.NativeEndian.AppendUint16(config, f.Code)
		config = append(config, f.Jt, f.Jf)
		config = binary.NativeEndian.AppendUint32(config, f.K)
	}
	configR, configW, err := os.Pipe()
	if err != nil {
		return Started{}, fmt.Errorf("confine: config pipe: %w", err)
	}
	defer configW.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		configR.Close()
		return Started{}, fmt.Errorf("confine: status pipe: %w", err)
	}
	defer statusR.Close()
	marker := envMarker + "=N"
	if ruleset != nil {
		marker = envMarker + "=L"
	}
	var nsFile, userFile *os.File
	if netns != nil {
		marker += "S"
		nsFile, userFile = netns.file, netns.user
		if userFile != nil {
			marker = marker[:len(marker)-1] + "U"
		}
	}
	cmd.Path = exe
	cmd.Args = append([]string{"maiden-confine", ws.Path}, ws.Argv...)
	cmd.Env = append(slices.DeleteFunc(slices.Clone(ws.Env), func(e string) bool {
		return len(e) >= len(envMarker)+1 && e[:len(envMarker)+1] == envMarker+"="
	}), marker)
	cmd.ExtraFiles = []*os.File{ruleset, configR, statusW, nsFile}
	if userFile != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, userFile)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	err = childproc.Start(cmd) // Pdeathsig follows the forking thread: internal/childproc
	configR.Close()
	statusW.Close()
	cmd.ExtraFiles = nil
	if err != nil {
		return Started{}, fmt.Errorf("confine: starting %s through %s: %w", ws.Path, filepath.Base(exe), err)
	}
	_, werr := configW.Write(config)
	configW.Close()
	msg, _ := io.ReadAll(io.LimitReader(statusR, 4096))
	if len(msg) == 0 && werr != nil {
		msg = []byte("sending the config: " + werr.Error())
	}
	if len(msg) > 0 {
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		_ = cmd.Wait()
		return Started{}, fmt.Errorf("confine: %s: %s", ws.Path, msg)
	}
	if netns != nil {
		// The relay lives as long as the process: a pidfd says when it
		// exits (the caller reaps it with cmd.Wait, so the PID is still
		// this process's here).
		pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
		if err != nil {
			_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
			_ = cmd.Wait()
			return Started{}, fmt.Errorf("confine: %s: pidfd_open: %w", ws.Path, err)
		}
		go func() {
			defer unix.Close(pidfd)
			defer netns.Close()
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, -1); err != unix.EINTR {
					return
				}
			}
		}()
	}
	started = true
	return Started{Landlock: ws.Landlock, Unconfined: unconfined, NetNS: netns != nil}, nil
}
